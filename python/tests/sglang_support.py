"""sglang_support.py - what the SGLang backend's tests and benchmark share.

- venv(build): a venv under <build>/python/venv-sglang holding sglang
  0.5.23 and the packages its HiCache storage and host-pool modules import,
  pinned (sglang-requirements.txt), installed with --no-deps: sglang's full
  requirement set is the CUDA serving stack (flashinfer, flash-attn,
  sgl-kernel, deep-ep, ...), none of which these modules need.  torch is
  PyPI's 2.14.1 (sglang's pin), a CUDA build that also runs on CPU.
- Kvtierd: a kvtierd on 127.0.0.1:0 with a DRAM and an SSD tier
  (ssd.admission=always: what survives a restart is what was put).
- host_pool(kind, layout): a real SGLang host KV pool (MHATokenToKVPoolHost
  or MLATokenToKVPoolHost) built on CPU from a real device pool
  (MHATokenToKVPool / MLATokenToKVPool with device="cpu").
- storage_config(...), backend(...): a HiCacheStorageConfig with the
  dynamic extra-config, and the backend made by SGLang's own
  StorageBackendFactory.
"""
import os
import signal
import sys
import time

import kvtierd_proc

HERE = os.path.dirname(os.path.abspath(__file__))
SGLANG_WHEEL = "sglang==0.5.23"
REQUIREMENTS = os.path.join(HERE, "sglang-requirements.txt")

# The test geometry: 2 layers, 2 KV heads of 64 (MHA) or a 128+32 latent
# row (MLA), bf16, 16-token pages.
PAGE = 16
MHA = dict(head_num=2, head_dim=64, layer_num=2)
MLA = dict(kv_lora_rank=128, qk_rope_head_dim=32, layer_num=2)
DEVICE_TOKENS = 512


def venv(build):
    """Python of the SGLang venv under build (made if missing or stale)."""
    # Skips (77) only when a separate probe cannot reach the package index;
    # any other failed install fails with pip's log (tests/lib/pipvenv.py).
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "tests", "lib"))
    import pipvenv
    return pipvenv.venv(os.path.join(build, "venv-sglang"),
                        [["--no-deps", SGLANG_WHEEL], ["--no-deps", "-r", REQUIREMENTS]],
                        pip=True)


class Kvtierd:
    """kvtierd on 127.0.0.1:0 with a DRAM and an SSD tier in base/dir."""

    def __init__(self, exe, base, dram="256M", ssd="512M", port=0):
        self.exe, self.base = exe, str(base)
        self.dir = os.path.join(self.base, "kvtierd-data")
        os.makedirs(self.dir, exist_ok=True)
        self.start(dram, ssd, port)

    def start(self, dram, ssd, port):
        self.logpath = os.path.join(self.base, f"kvtierd-{time.monotonic_ns()}.log")
        self.proc, self.port = kvtierd_proc.start(
            self.exe, self.dir, self.logpath,
            ["--dram", dram, "--ssd", ssd, "--set", "dram.prefault=off",
             "--set", "ssd.segment=4M",
             # every block written down at put, so a restart finds it (the
             # default writes a block down on its second use)
             "--set", "ssd.admission=always"], port=port)
        self.addr = f"127.0.0.1:{self.port}"

    def restart(self, dram="256M", ssd="512M"):
        """SIGTERM, then a new kvtierd on the same directory and port."""
        assert self.stop() == 0
        self.start(dram, ssd, self.port)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)


def device_pool(kind, geometry=None, tokens=DEVICE_TOKENS):
    import torch
    if kind == "mha":
        from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool
        return MHATokenToKVPool(size=tokens, page_size=PAGE, dtype=torch.bfloat16,
                                device="cpu", enable_memory_saver=False,
                                **dict(MHA, **(geometry or {})))
    from sglang.srt.mem_cache.memory_pool import MLATokenToKVPool
    return MLATokenToKVPool(size=tokens, page_size=PAGE, dtype=torch.bfloat16,
                            device="cpu", enable_memory_saver=False,
                            **dict(MLA, **(geometry or {})))


def host_pool(kind, layout="page_first", ratio=2.0, geometry=None, tokens=DEVICE_TOKENS):
    """A real SGLang host KV pool on CPU (ratio x the device pool's tokens);
    its device pool is kept on it.  geometry overrides MHA / MLA."""
    dev = device_pool(kind, geometry, tokens)
    info = dev.get_device_pool_infos()[0].buffer_info
    common = dict(pin_memory=False, device="cpu", device_capacity_tokens=tokens,
                  start_layer=0, end_layer=dev.layer_num)
    if kind == "mha":
        from sglang.srt.mem_cache.pool_host.mha import MHATokenToKVPoolHost
        host = MHATokenToKVPoolHost(info, ratio, 0, PAGE, layout, **common)
    else:
        from sglang.srt.mem_cache.pool_host.mla import MLATokenToKVPoolHost
        host = MLATokenToKVPoolHost(info, ratio, 0, PAGE, layout,
                                    target_layer_num=dev.layer_num, **common)
    host._device_pool = dev
    return host


def storage_config(kind, options, tp_rank=0, tp_size=1, model="kvtier-test/tiny",
                   interface_v1=True, **extra):
    from sglang.srt.mem_cache.hicache_storage import HiCacheStorageConfig
    cfg = {"backend_name": "kvtier", "module_path": "kvtier.sglang",
           "class_name": "KVTierHiCacheStorage", "interface_v1": int(interface_v1),
           "kvtier.options": options}
    cfg.update(extra)
    return HiCacheStorageConfig(
        tp_rank=tp_rank, tp_size=tp_size, pp_rank=0, pp_size=1, attn_cp_rank=0,
        attn_cp_size=1, is_mla_model=kind == "mla", enable_storage_metrics=False,
        is_page_first_layout=True, model_name=model, extra_config=cfg)


def backend(kind, options, host, **kw):
    """The backend as SGLang's cache controller makes it: the factory with
    backend "dynamic", then register_mem_pool_host."""
    from sglang.srt.mem_cache.storage import StorageBackendFactory
    be = StorageBackendFactory.create_backend("dynamic", storage_config(kind, options, **kw),
                                              host)
    be.register_mem_pool_host(host)
    return be


def page_hashes(n, seed=0):
    """n SGLang page hashes for a token sequence, chained the way SGLang's
    cache controller computes them (get_storage_hash_str)."""
    import random
    from sglang.srt.mem_cache.utils import get_storage_hash_str
    rng = random.Random(seed)
    tokens = [rng.randrange(0, 32000) for _ in range(n * PAGE)]
    return get_storage_hash_str(tokens, None, page_size=PAGE)


def fill_pages(host, indices, seed):
    """Random bytes into the pages at host indices (every byte each page
    stores, whatever the layout)."""
    import torch
    g = torch.Generator().manual_seed(seed)
    for p in range(0, len(indices), host.page_size):
        page = host.get_data_page(int(indices[p]), flat=False)
        page.view(torch.uint8).copy_(torch.randint(0, 256, page.view(torch.uint8).shape,
                                                   dtype=torch.uint8, generator=g))


def page_bytes(host, indices):
    """The bytes of each page at host indices, through SGLang's own
    get_data_page (not through the pointers the backend uses)."""
    import torch
    return [host.get_data_page(int(indices[p]), flat=False).contiguous().view(torch.uint8)
            .numpy().tobytes() for p in range(0, len(indices), host.page_size)]

"""kvtier.sglang against the real sglang 0.5.23 and a real kvtierd.

Run by run_sglang.py (meson test python_sglang, suite sglang, opt-in with
-Dsglang=true): PYTHONPATH holds the built package and this directory,
KVTIERD the server binary.  SGLang's own StorageBackendFactory makes the
backend from the "dynamic" extra-config; SGLang's own host KV pools (MHA
and MLA), built on CPU from SGLang's device pools, hold the pages; bytes
are compared through SGLang's get_data_page, not through the pointers the
backend uses.
"""
import json
import logging
import os
import subprocess
import sys

import pytest
import torch

import kvtier
import kvtier.sglang as ks
import sglang_support as sup

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def kvtierd(tmp_path):
    if not os.environ.get("KVTIERD"):
        pytest.fail("KVTIERD is not set (run through meson test)")
    srv = sup.Kvtierd(os.environ["KVTIERD"], tmp_path)
    yield srv
    assert srv.stop() == 0


def local(**extra):
    opts = {"dram.capacity": "64M", "dram.prefault": "off", "dram.shards": 1}
    opts.update(extra)
    return opts


def run_pages(**a):
    """sglang_pages.py in a process of its own; its JSON result."""
    r = subprocess.run([sys.executable, os.path.join(HERE, "sglang_pages.py"), json.dumps(a)],
                       capture_output=True, text=True, timeout=600)
    lines = [x for x in r.stdout.splitlines() if x.startswith("@@")]
    assert r.returncode == 0 and lines, r.stderr[-3000:]
    return json.loads(lines[-1][2:])


# ---------------------------------------------------------------- set-up


def test_factory_makes_the_backend():
    """SGLang's StorageBackendFactory, backend "dynamic", imports
    kvtier.sglang from the extra-config and constructs the class with
    (storage_config, kwargs); the controller's register_mem_pool_host
    then gives it its namespace."""
    from sglang.srt.mem_cache.hicache_storage import HiCacheStorage
    from sglang.srt.mem_cache.storage import StorageBackendFactory
    host = sup.host_pool("mha")
    cfg = sup.storage_config("mha", local())
    be = StorageBackendFactory.create_backend("dynamic", cfg, host)
    assert type(be) is ks.KVTierHiCacheStorage and isinstance(be, HiCacheStorage)
    assert be.ns is None and be.batch_exists(sup.page_hashes(2)) == 0  # no pool yet: misses
    be.register_mem_pool_host(host)
    assert be.ns is not None and be.mem_pool_host is host
    be.close()
    # the same factory refuses a class that is not a HiCacheStorage
    bad = sup.storage_config("mha", local(), class_name="Store", module_path="kvtier")
    with pytest.raises(TypeError):
        StorageBackendFactory.create_backend("dynamic", bad, host)


def test_namespace_from_storage_config():
    """Model, dtype, page size, TP rank/size and the MHA/MLA layout are in
    the namespace; MLA KV is the same on every TP rank (rank-agnostic),
    MHA KV is not; options keep the vLLM connector's names."""
    mha = [sup.backend("mha", local(), sup.host_pool("mha"), tp_rank=r, tp_size=2)
           for r in (0, 1)]
    mla = [sup.backend("mla", local(), sup.host_pool("mla"), tp_rank=r, tp_size=r + 2)
           for r in (0, 1)]
    d = mha[0].desc
    assert d["model"] == "kvtier-test/tiny" and d["dtype"] == "bfloat16"
    assert d["block_tokens"] == sup.PAGE and (d["tp_rank"], d["tp_size"]) == (0, 2)
    assert d["layout"] == "sglang-mha-page_first-L2-H2x64x64-v1"
    assert mha[0].digest != mha[1].digest            # per-rank KV heads
    assert mla[0].desc["layout"] == "sglang-mla-page_first-L2-D160-v1"
    assert mla[0].desc["rank_agnostic"] and mla[0].digest == mla[1].digest
    assert mla[0].digest != mha[0].digest
    other = sup.backend("mha", local(), sup.host_pool("mha", "layer_first"))
    assert other.desc["layout"].startswith("sglang-mha-layer_first") and \
        other.digest != mha[0].digest
    model = sup.backend("mha", local(), sup.host_pool("mha"), **{"kvtier.model_id": "x/y"})
    assert model.desc["model"] == "x/y"
    persist = sup.backend("mha", local(), sup.host_pool("mha"), **{"kvtier.persistent": True})
    assert persist.desc["persistent"] and persist.digest == \
        sup.backend("mha", local(), sup.host_pool("mha")).digest  # a flag, not identity
    assert ks.store_options({"kvtier.options": {"remote.addr": "h:1"}}) == \
        {"remote.addr": "h:1", "dram.capacity": "1G"}
    for b in mha + mla + [other, model, persist]:
        b.close()


def test_retain_hint_reaches_the_store():
    """The retain hint (doc/policies.md "The retain hint"): SGLang's own
    write -- batch_set_v1 with HiCacheStorageExtraInfo(prefix_keys=...),
    as its backup thread calls it -- stores unhinted; extra_info.extra_info
    {"kvtier_retain": True} stores with KVT_F_RETAIN (the store's
    dram.retain_hints); kvtier.retain registers the namespace KVT_NS_RETAIN
    (the same digest) and hints every page stored."""
    from sglang.srt.mem_cache.hicache_storage import HiCacheStorageExtraInfo
    p = sup.PAGE
    keys = sup.page_hashes(8, seed=12)
    host = sup.host_pool("mha")
    be = sup.backend("mha", local(), host)
    idx = host.alloc(8 * p)
    sup.fill_pages(host, idx, seed=13)
    own = HiCacheStorageExtraInfo(prefix_keys=sup.page_hashes(1, seed=14))
    assert be.batch_set_v1(keys[:4], idx[:4 * p], own) == [True] * 4
    assert be.stats()["store"]["dram.retain_hints"] == 0
    hinted = HiCacheStorageExtraInfo(extra_info={"kvtier_retain": True})
    assert be.batch_set_v1(keys[4:], idx[4 * p:], hinted) == [True] * 4
    st = be.stats()
    assert st["store"]["dram.retain_hints"] == 4 and st["backend"]["set_retained"] == 4
    be.close()
    ret = sup.backend("mha", local(), sup.host_pool("mha"), **{"kvtier.retain": True})
    assert ret.desc["retain"] is True and ret.digest == be.digest   # a flag, not identity
    h = ret.mem_pool_host
    i = h.alloc(4 * p)
    sup.fill_pages(h, i, seed=15)
    assert ret.batch_set_v1(keys[:4], i, own) == [True] * 4
    st = ret.stats()
    assert st["store"]["dram.retain_hints"] == 4 and st["backend"]["set_retained"] == 4
    ret.close()


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize("kind,layout", [("mha", "page_first"), ("mha", "layer_first"),
                                         ("mha", "page_first_direct"), ("mla", "page_first"),
                                         ("mla", "layer_first")])
def test_round_trip_through_kvtierd(kvtierd, kind, layout):
    """Engine A's backend stores 40 pages (batch_set_v1, one call per 128
    pages as SGLang batches them) through to kvtierd; engine B's, with an
    empty DRAM, finds all 40 on the server (batch_exists) and loads them
    (batch_get_v1) into other host pages, byte for byte."""
    opts = local(**{"remote.addr": kvtierd.addr})
    n = 40
    keys = sup.page_hashes(n, seed=1)
    ha = sup.host_pool(kind, layout)
    a = sup.backend(kind, opts, ha)
    ia = ha.alloc(n * sup.PAGE)
    sup.fill_pages(ha, ia, seed=7)
    assert a.batch_set_v1(keys, ia) == [True] * n
    a.flush()
    sent = sup.page_bytes(ha, ia)
    st = a.stats()
    assert st["backend"]["set_stored"] == n and st["store"]["remote.puts_stored"] == n
    a.close()

    hb = sup.host_pool(kind, layout)
    b = sup.backend(kind, opts, hb)
    assert b.digest == a.digest
    assert b.batch_exists(keys) == n
    ib = hb.alloc(n * sup.PAGE)
    assert not any(x == y for x, y in zip(sup.page_bytes(hb, ib), sent))
    assert b.batch_get_v1(keys, ib) == [True] * n
    assert sup.page_bytes(hb, ib) == sent
    st = b.stats()
    assert st["store"]["remote.hits"] == n and st["backend"]["get_hits"] == n
    assert st["backend"]["get_calls"] == 1          # one call for 40 pages
    # stored again: already there, not an error
    assert b.batch_set_v1(keys[:4], ib[:4 * sup.PAGE]) == [True] * 4
    assert b.stats()["backend"]["set_present"] == 4
    b.close()


def test_batch_exists_counts_consecutive_hits():
    host = sup.host_pool("mha")
    be = sup.backend("mha", local(), host)
    keys = sup.page_hashes(8, seed=2)
    idx = host.alloc(8 * sup.PAGE)
    sup.fill_pages(host, idx, seed=3)
    keep = [i for i in range(8) if i != 5]
    pages = torch.cat([idx[i * sup.PAGE:(i + 1) * sup.PAGE] for i in keep])
    assert be.batch_set_v1([keys[i] for i in keep], pages) == [True] * 7
    assert be.batch_exists(keys) == 5                 # 0..4, then page 5 is missing
    assert be.batch_exists(keys[6:]) == 2
    assert be.batch_exists(keys[5:]) == 0
    assert be.batch_exists([]) == 0
    assert be.exists(keys[0]) and not be.exists(keys[5])
    # a load stops being useful at the first miss: SGLang counts the leading Trues
    got = be.batch_get_v1(keys, host.alloc(8 * sup.PAGE))
    assert got == [True] * 5 + [False] + [True] * 2
    be.close()


def test_negative_control_planted_pages(kvtierd):
    """Other pages planted under this prompt's keys load (the store cannot
    know) and the byte comparison this suite relies on catches them;
    pages stored in another namespace (another TP rank's heads) miss."""
    opts = local(**{"remote.addr": kvtierd.addr})
    n = 6
    keys = sup.page_hashes(n, seed=4)
    right = sup.host_pool("mha")
    ir = right.alloc(n * sup.PAGE)
    sup.fill_pages(right, ir, seed=10)
    want = sup.page_bytes(right, ir)
    planter = sup.backend("mha", opts, sup.host_pool("mha"))
    hp = planter.mem_pool_host
    ip = hp.alloc(n * sup.PAGE)
    sup.fill_pages(hp, ip, seed=11)                   # other bytes, same keys
    assert planter.batch_set_v1(keys, ip) == [True] * n
    planter.flush()
    other_rank = sup.backend("mha", opts, sup.host_pool("mha"), tp_rank=1, tp_size=2)
    assert other_rank.batch_set_v1(sup.page_hashes(n, seed=5), ip) == [True] * n
    planter.close()

    reader = sup.backend("mha", opts, sup.host_pool("mha"))
    hr = reader.mem_pool_host
    ig = hr.alloc(n * sup.PAGE)
    assert reader.batch_get_v1(keys, ig) == [True] * n
    got = sup.page_bytes(hr, ig)
    assert got == sup.page_bytes(hp, ip)              # the planted pages...
    assert all(g != w for g, w in zip(got, want))     # ...are detected as wrong
    assert reader.batch_exists(sup.page_hashes(n, seed=5)) == 0  # rank 1's: not ours
    reader.close()
    other_rank.close()


def test_restart_from_ssd_across_processes(kvtierd):
    """A process stores 24 pages (MHA and MLA) through kvtierd (whose SSD
    admission is "always": straight to its SSD tier) and exits; kvtierd restarts on its
    directory; a new process finds them (tier SSD on the server) and loads
    them byte for byte.  Then the same with the engine's own SSD directory
    and no kvtierd."""
    for kind in ("mha", "mla"):
        opts = local(**{"remote.addr": kvtierd.addr})
        cfg = {"kvtier.persistent": True}
        w = run_pages(op="set", kind=kind, n=24, seed=21, options=opts, config=cfg)
        assert w["set"] == [True] * 24
        kvtierd.restart()
        opts["remote.addr"] = kvtierd.addr
        r = run_pages(op="get", kind=kind, n=24, seed=21, options=opts, config=cfg)
        assert r["namespace"] == w["namespace"]
        assert r["exists"] == 24 and r["get"] == [True] * 24 and all(r["equal"]), r
        assert r["store"]["remote.hits"] == 24
        # the negative control of the comparison itself: another seed differs
        bad = run_pages(op="get", kind=kind, n=24, seed=22, options=opts, config=cfg)
        assert bad["get"] == [True] * 24 and not any(bad["equal"])

    path = os.path.join(kvtierd.base, "engine-store")
    opts = local(path=path, **{"ssd.capacity": "64M", "ssd.segment": "4M"})
    w = run_pages(op="set", kind="mha", n=16, seed=31, options=opts,
                  config={"kvtier.persistent": True})
    assert w["set"] == [True] * 16
    r = run_pages(op="get", kind="mha", n=16, seed=31, options=opts,
                  config={"kvtier.persistent": True})
    assert r["exists"] == 16 and r["get"] == [True] * 16 and all(r["equal"])
    assert r["store"]["ssd.reads"] >= 16 and r["store"]["dram.blocks"] == 16


# ---------------------------------------------------------------- SGLang's controller


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory):
    """What SGLang's scheduler sets up before its HiCacheController: a
    process group (gloo, one rank) and the parallel widths."""
    import torch.distributed as dist
    from sglang.srt.runtime_context import get_parallel
    if not dist.is_initialized():
        dist.init_process_group("gloo", rank=0, world_size=1, init_method="file://" +
                                str(tmp_path_factory.mktemp("pg") / "rendezvous"))
    get_parallel().override_permanently(attn_dcp_size=1, attn_dcp_rank=0, tp_rank=0,
                                        tp_size=1, pp_rank=0, pp_size=1)
    return dist.group.WORLD


def controller(kind, options, group, **extra):
    """SGLang's HiCacheController over a CPU device pool and host pool, with
    storage backend "dynamic" and our extra-config, as the scheduler makes
    it (it creates the backend through the factory and starts its storage
    threads)."""
    import threading
    from sglang.srt.managers.cache_controller import HiCacheController
    from sglang.srt.mem_cache.allocator import PagedTokenToKVPoolAllocator
    host = sup.host_pool(kind)
    alloc = PagedTokenToKVPoolAllocator(size=sup.DEVICE_TOKENS, page_size=sup.PAGE,
                                        dtype=torch.bfloat16, device="cpu",
                                        kvcache=host._device_pool, need_sort=False)
    cfg = sup.storage_config(kind, options, **extra).extra_config
    c = HiCacheController(alloc, host, sup.PAGE, group, threading.Event(),
                          write_policy="write_through", io_backend="direct",
                          storage_backend="dynamic", model_name="kvtier-test/tiny",
                          storage_backend_extra_config=cfg)
    return c, host


@pytest.mark.parametrize("kind", ["mha", "mla"])
def test_sglang_cache_controller_drives_the_backend(one_rank, tmp_path, kind):
    """SGLang's own cache controller, on CPU: write_storage backs 20 host
    pages up through its backup thread (batch_set_v1); the controller is
    detached (the store closed); a second controller on the same store
    directory prefetches the same tokens: its prefetch thread counts the
    hits (batch_exists), its I/O thread loads them (batch_get_v1) into
    host pages it did not write, byte for byte."""
    import random
    from sglang.srt.mem_cache.utils import get_storage_hash_str
    rng = random.Random(3)
    n = 20
    tokens = [rng.randrange(0, 32000) for _ in range(n * sup.PAGE)]
    hashes = get_storage_hash_str(tokens, None, page_size=sup.PAGE)
    opts = local(path=str(tmp_path / "store"), **{"ssd.capacity": "64M",
                                                  "ssd.segment": "4M"})
    c, host = controller(kind, opts, one_rank, **{"kvtier.persistent": True})
    assert type(c.storage_backend) is ks.KVTierHiCacheStorage
    assert c.page_set_func == c._page_set_zero_copy       # interface_v1 honoured
    idx = host.alloc(n * sup.PAGE)
    sup.fill_pages(host, idx, seed=5)
    want = sup.page_bytes(host, idx)
    op_id = c.write_storage(idx, tokens, hash_value=hashes)
    op = c.ack_backup_queue.get(timeout=120)
    assert op.id == op_id and op.completed_tokens == n * sup.PAGE
    assert c.storage_backend.stats()["backend"]["set_stored"] == n
    c.detach_storage_backend()

    c2, host2 = controller(kind, opts, one_rank, **{"kvtier.persistent": True})
    op = c2.prefetch("req-1", tokens)
    hit = c2.prefetch_hit_queue.get(timeout=120)
    assert hit is op and hit.storage_hit_count == n * sup.PAGE and hit.hash_value == hashes
    hit.host_indices = host2.alloc(hit.storage_hit_count)   # the scheduler's part
    c2.prefetch_buffer.put(hit)
    done = []
    while True:
        ack = c2.ack_prefetch_queue.get(timeout=120)
        done.append(ack.completed_tokens)
        if ack.completed_req:
            break
    assert n * sup.PAGE in done
    assert sup.page_bytes(host2, hit.host_indices) == want
    st = c2.storage_backend.stats()
    assert st["backend"]["get_calls"] == 1 and st["backend"]["get_hits"] == n
    assert st["store"]["ssd.reads"] >= n                   # from the SSD tier
    c2.detach_storage_backend()


# ---------------------------------------------------------------- failures


def test_failures_are_misses_not_exceptions(caplog):
    """A kvtierd that is not there, a page larger than the whole store, a
    closed store, a pool never registered: False / 0 / None and a log
    line, never an exception into SGLang's cache controller."""
    caplog.set_level(logging.WARNING, logger="kvtier.sglang")
    keys = sup.page_hashes(4, seed=6)
    down = sup.backend("mha", local(**{"remote.addr": "127.0.0.1:1",
                                       "remote.timeout_ms": 300,
                                       "remote.connect_timeout_ms": 200}),
                       sup.host_pool("mha"))
    idx = down.mem_pool_host.alloc(4 * sup.PAGE)
    assert down.batch_exists(keys) == 0
    assert down.batch_get_v1(keys, idx) == [False] * 4
    down.close()

    # pages of 256 KiB (16 heads of 128) into a 64 KiB store: none fits
    full = sup.backend("mha", local(**{"dram.capacity": "64K"}),
                       sup.host_pool("mha", geometry=dict(head_num=16, head_dim=128)))
    big = full.mem_pool_host.alloc(4 * sup.PAGE)
    assert full.batch_set_v1(keys, big) == [False] * 4
    assert full.stats()["backend"]["set_failed"] == 4
    assert full.batch_get_v1(keys, big) == [False] * 4
    full.close()                                     # closed: misses from now on
    assert full.batch_set_v1(keys, big) == [False] * 4
    assert full.batch_get_v1(keys, big) == [False] * 4
    assert full.batch_exists(keys) == 0 and full.set(keys[0], torch.zeros(8)) is False

    from sglang.srt.mem_cache.storage import StorageBackendFactory
    lone = StorageBackendFactory.create_backend("dynamic", sup.storage_config("mha", local()),
                                                None)
    assert lone.batch_get_v1(keys, idx) == [False] * 4   # no host pool registered
    lone.close()
    # wrong index counts are the controller's bug, still not an exception here
    be = sup.backend("mha", local(), sup.host_pool("mha"))
    assert be.batch_set_v1(keys, idx[:5]) == [False] * 4
    be.close()
    assert any("kvtier:" in rec.getMessage() for rec in caplog.records)


# ---------------------------------------------------------------- legacy interface


def test_legacy_flat_page_interface():
    """Without interface_v1 SGLang moves flat pages (get_data_page /
    get_dummy_flat_data_page / set_from_flat_data_page) through get/set/
    batch_get/batch_set; they round-trip too, in a namespace of their own
    (their byte order is not the v1 parts')."""
    host = sup.host_pool("mha")
    be = sup.backend("mha", local(), host, interface_v1=False)
    assert be.desc["layout"].endswith("-flat")
    keys = sup.page_hashes(3, seed=8)
    idx = host.alloc(3 * sup.PAGE)
    sup.fill_pages(host, idx, seed=9)
    pages = [host.get_data_page(int(idx[i * sup.PAGE]), flat=True) for i in range(3)]
    assert be.batch_set(keys, pages) is True
    assert be.set(keys[0], pages[0]) is True          # present: fine
    dst = [host.get_dummy_flat_data_page() for _ in range(4)]
    got = be.batch_get(keys + [sup.page_hashes(4, seed=99)[3]], dst)
    assert got[3] is None and all(g is d for g, d in zip(got[:3], dst))
    assert all(torch.equal(g.view(torch.uint8), p.view(torch.uint8))
               for g, p in zip(got, pages))
    assert be.get(keys[1], host.get_dummy_flat_data_page()) is not None
    assert be.batch_exists(keys) == 3
    be.close()


def test_page_key():
    h = "ab" * 32
    assert ks.page_key(h) == bytes.fromhex(h)
    assert ks.page_key("mooncake-style_key") == b"mooncake-style_key"
    assert len(ks.page_key("x" * 32)) == 33 and len(ks.page_key("y" * 200)) == 33
    assert ks.page_key("x" * 32) != ks.page_key("y" * 32)

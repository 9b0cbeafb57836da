#!/usr/bin/env python3
"""sglang_pages.py - SGLang HiCache page round trips through kvtier (v1 interface).

Usage (the SGLang venv of python/tests/run_sglang.py; made by
`meson test -C build --suite sglang`, or by sglang_support.venv):

    PYTHONPATH=build/python:python/tests build/python/venv-sglang/bin/python \\
        bench/sglang_pages.py --kvtierd build/daemon/kvtierd [--pages 128] \\
        [--layers 32 --heads 8 --head-dim 128 --page 16] [--rounds 5] [--json]

A real SGLang MHA host pool (page_first, bf16) on CPU; one SGLang storage
batch of --pages pages (SGLang moves at most 128 per call) with random
bytes.  Per round, in alternating order (ABBA), each timed alone:

  numpy      a plain NumPy copy of the same pages: each part that
             get_page_buffer_meta names (a page's K and V), from the
             source pages to the destination pages (the memory a store
             would have to touch at least once)
  set        batch_set_v1 of the batch into an emptied store (DRAM tier)
  get        batch_get_v1 of the batch, DRAM hits, into the destination
  remote_set batch_set_v1 with a kvtierd below (write-through, flushed)
  remote_get batch_get_v1 from a new store with an empty DRAM: every page
             from kvtierd over loopback TCP

GB/s = 10^9 bytes of page data per second; ratio = median rate over the
median NumPy rate of the same run.  Every get is checked byte for byte
against the source pages (outside the timed region).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python", "tests"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import sglang_support as sup  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kvtierd", help="kvtierd binary (remote rows); none: skip them")
    ap.add_argument("--pages", type=int, default=128)
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--page", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    sup.PAGE = a.page
    tokens = a.pages * a.page
    geom = dict(layer_num=a.layers, head_num=a.heads, head_dim=a.head_dim)
    host = sup.host_pool("mha", "page_first", ratio=2.0, geometry=geom, tokens=tokens)
    src = host.alloc(tokens)
    dst = host.alloc(tokens)
    sup.fill_pages(host, src, seed=1)
    want = sup.page_bytes(host, src)
    keys = sup.page_hashes(a.pages, seed=2)
    page_bytes = len(want[0])
    batch = page_bytes * a.pages

    # NumPy views of the same parts the backend moves
    base = host.kv_buffer.data_ptr()
    arena = host.kv_buffer.view(torch.uint8).view(-1).numpy()
    sp, sl = host.get_page_buffer_meta(src)
    dp, _ = host.get_page_buffer_meta(dst)
    pairs = [(arena[d - base:d - base + n], arena[s - base:s - base + n])
             for s, d, n in zip(sp, dp, sl)]

    def clear_dst():
        for d, _ in pairs:
            d[:] = 0

    def check():
        got = sup.page_bytes(host, dst)
        if got != want:
            raise SystemExit("bytes differ")

    tmp = tempfile.mkdtemp(prefix="sglang-bench-")
    local = {"dram.capacity": f"{max(2 * batch, 1 << 28)}", "dram.prefault": "on"}
    be = sup.backend("mha", local, host)
    srv = None
    if a.kvtierd:
        srv = sup.Kvtierd(a.kvtierd, tmp, dram=f"{2 * batch + (64 << 20)}", ssd="0")
        remote = dict(local, **{"remote.addr": srv.addr})

    def t_numpy():
        clear_dst()
        t0 = time.perf_counter()
        for d, s in pairs:
            np.copyto(d, s)
        t = time.perf_counter() - t0
        check()
        return t

    def t_set():
        be.store.clear(be.ns)
        t0 = time.perf_counter()
        ok = be.batch_set_v1(keys, src)
        t = time.perf_counter() - t0
        assert ok == [True] * a.pages, ok
        return t

    def t_get():
        clear_dst()
        t0 = time.perf_counter()
        ok = be.batch_get_v1(keys, dst)
        t = time.perf_counter() - t0
        assert ok == [True] * a.pages, ok
        check()
        return t

    def t_remote():
        w = sup.backend("mha", remote, host)
        w.store.clear(w.ns)              # the server's copy too (clear is sent)
        t0 = time.perf_counter()
        ok = w.batch_set_v1(keys, src)
        w.flush()
        ts = time.perf_counter() - t0
        assert ok == [True] * a.pages, ok
        w.close()
        r = sup.backend("mha", remote, host)
        clear_dst()
        t0 = time.perf_counter()
        ok = r.batch_get_v1(keys, dst)
        tg = time.perf_counter() - t0
        assert ok == [True] * a.pages, ok
        assert r.stats()["store"]["remote.hits"] == a.pages
        check()
        r.close()
        return ts, tg

    times = {k: [] for k in ("numpy", "set", "get", "remote_set", "remote_get")}
    t_numpy(), t_set(), t_get()          # warm-up: fault in, first allocations
    for rnd in range(a.rounds):
        order = ["numpy", "kvtier"] if rnd % 2 == 0 else ["kvtier", "numpy"]
        for what in order:
            if what == "numpy":
                times["numpy"].append(t_numpy())
            else:
                times["set"].append(t_set())
                times["get"].append(t_get())
                if srv:
                    ts, tg = t_remote()
                    times["remote_set"].append(ts)
                    times["remote_get"].append(tg)
    be.close()
    if srv:
        srv.stop()

    rate = {k: batch / statistics.median(v) / 1e9 for k, v in times.items() if v}
    out = {"bench": "sglang_pages", "date": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()),
           "pages": a.pages, "page_bytes": page_bytes, "batch_bytes": batch,
           "geometry": dict(geom, page=a.page, dtype="bf16", layout="page_first"),
           "rounds": a.rounds, "load1": os.getloadavg()[0],
           "gbps": {k: round(v, 3) for k, v in rate.items()},
           "ratio_vs_numpy": {k: round(v / rate["numpy"], 3) for k, v in rate.items()},
           "gbps_rounds": {k: [round(batch / t / 1e9, 3) for t in v]
                           for k, v in times.items() if v}}
    if a.json:
        print(json.dumps(out))
    else:
        print(f"{a.pages} pages of {page_bytes} B ({batch / 2**20:.0f} MiB), "
              f"{a.rounds} rounds, load {out['load1']:.1f}")
        for k, v in rate.items():
            print(f"  {k:11s} {v:7.2f} GB/s  {v / rate['numpy']:5.2f}x numpy")


if __name__ == "__main__":
    main()

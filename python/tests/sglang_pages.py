#!/usr/bin/env python3
"""sglang_pages.py - one SGLang process's worth of HiCache storage I/O.

Usage: sglang_pages.py JSON.  Builds a real SGLang host KV pool on CPU
(sglang_support.host_pool), makes the kvtier backend through SGLang's
factory, then:
  op "set": fills n pages with bytes from seed, batch_set_v1, flush;
  op "get": batch_exists, batch_get_v1 into fresh host pages, and compares
            them byte for byte with the pages seed makes.
Prints one JSON line starting with @@ (results, backend counters, store
statistics).  The tests run it as separate processes to show pages
surviving a process (and kvtierd) restart.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sglang_support as sup  # noqa: E402


def main():
    a = json.loads(sys.argv[1])
    host = sup.host_pool(a["kind"], a.get("layout", "page_first"))
    be = sup.backend(a["kind"], a["options"], host, **a.get("config", {}))
    keys = sup.page_hashes(a["n"], a.get("key_seed", 0))
    out = {"namespace": be.digest.hex(), "desc": be.desc}
    if a["op"] == "set":
        idx = host.alloc(a["n"] * sup.PAGE)
        sup.fill_pages(host, idx, a["seed"])
        out["set"] = be.batch_set_v1(keys, idx)
        be.flush()
    else:
        ref = sup.host_pool(a["kind"], a.get("layout", "page_first"))
        ridx = ref.alloc(a["n"] * sup.PAGE)
        sup.fill_pages(ref, ridx, a["seed"])
        want = sup.page_bytes(ref, ridx)
        out["exists"] = be.batch_exists(keys)
        idx = host.alloc(a["n"] * sup.PAGE)
        out["get"] = be.batch_get_v1(keys, idx)
        got = sup.page_bytes(host, idx)
        out["equal"] = [g == w for g, w in zip(got, want)]
    st = be.stats()
    out["backend"] = st["backend"]
    out["store"] = {k: v for k, v in st["store"].items()
                    if k.split(".")[0] in ("dram", "ssd", "remote")}
    be.close()
    print("@@" + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""vllm_ttft.py - vLLM's time to first token with and without kvtier.

Usage (from the repository root, after a build with -Dvllm=true or any
build plus this script's --build):

    python3 bench/vllm_ttft.py --build build-release [--lengths 2048,8192,16384]
        [--reps 3] [--options k=v,...] [--baseline]

Makes (once) the pinned vLLM venv under BUILD/python/venv-vllm
(python/tests/vllm_support.py), writes the test model (a 2-layer
random-weight Llama, vllm_support.MODEL) and starts one vLLM CPU engine with
the kvtier connector and vLLM's own prefix cache off.  For each prompt
length N (a fresh random prompt each):

  cold      the first run: computed in full, its whole blocks stored in kvtier
  computed  the prompt again with kvtier told not to load or store it
            ({"kvtier_load": False, "kvtier_store": False}): the engine's
            own prefill, what an engine without kvtier does
  kvtier    the prompt again: its leading whole blocks loaded from kvtier
            (all but the last partial block and the last token), the rest
            computed

computed and kvtier runs alternate, --reps times each; the table shows
medians.  With --baseline a second engine without any connector, up at the
same time, runs the prompt too, in the same alternation (the connector's
own cost when it does nothing).
Each run is one request with max_tokens=1, so its wall time is its TTFT.
Prefill tokens/s is N / computed TTFT; load GB/s is the bytes the worker
loaded over the time its get_into calls took (connector counters).  The
store is the engine's DRAM unless --options names others (path,
ssd.capacity, remote.addr).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python", "tests"))
import vllm_support as vs  # noqa: E402

BS = 128


# Pause before each timed run: vLLM's CPU workers use Intel OpenMP, whose
# threads spin for KMP_BLOCKTIME (200 ms) after a parallel region, so a short
# run right after another engine's run shares the 2 cores with its spinning
# threads (measured: 1,920 loaded tokens took 300 to 500 ms that way, 37 to
# 76 ms without the other engine).
SETTLE_S = 0.5


def run(eng, toks, params=None):
    time.sleep(SETTLE_S)
    r = eng.generate([{"prompt_token_ids": toks, "params": params}])["results"][0]
    return r["wall_s"], (r["kv_transfer_params"] or {}).get("kvtier_loaded_tokens")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True, help="meson build dir (holds python/kvtier)")
    ap.add_argument("--lengths", default="2048,8192,16384")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--options", default="dram.capacity=1G,dram.prefault=off",
                    help="kvtier store options, NAME=VALUE,...")
    ap.add_argument("--baseline", action="store_true",
                    help="also time an engine without any connector")
    ap.add_argument("--dir", default=None, help="work dir (default: a temporary one)")
    a = ap.parse_args()
    build_py = os.path.join(os.path.abspath(a.build), "python")
    py = vs.venv(build_py)
    work = a.dir or tempfile.mkdtemp(prefix="kvtier-vllm-ttft.")
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "model")
    if not os.path.exists(os.path.join(model, "model.safetensors")):
        subprocess.run([py, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                        "import vllm_support; vllm_support.write_model(sys.argv[2])",
                        os.path.join(ROOT, "python", "tests"), model], check=True)
    lengths = [int(x) for x in a.lengths.split(",")]
    max_len = max(lengths) + BS
    env = {"PYTHONPATH": os.pathsep.join([build_py, os.path.join(ROOT, "python", "tests")]),
           "VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_NO_USAGE_STATS": "1",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    opts = dict(kv.split("=", 1) for kv in a.options.split(",") if kv)
    eid = f"kvtier-ttft-{os.getpid()}"
    eng = vs.Engine(py, model, os.path.join(work, "engine.log"),
                    kvtier_extra={"kvtier.options": opts}, engine_id=eid,
                    max_model_len=max_len, env=env)
    startup = eng.ready["startup_s"]
    st = eng.stats()
    base_eng = None
    if a.baseline:
        base_eng = vs.Engine(py, model, os.path.join(work, "engine-base.log"),
                             kvtier_extra=None, engine_id=eid + "-base",
                             max_model_len=max_len, env=env)
    rows, base = [], {}
    try:
        for i, n in enumerate(lengths):
            toks = vs.prompt(n, seed=1000 + i)
            cold, loaded0 = run(eng, toks)
            assert loaded0 == 0, loaded0
            if base_eng is not None:
                run(base_eng, toks)  # its first run of this length: not timed
            s0 = eng.stats()["connector"]
            comp, hit, bl, loaded = [], [], [], None
            for _ in range(a.reps):
                comp.append(run(eng, toks, {"kvtier_load": False, "kvtier_store": False})[0])
                if base_eng is not None:
                    bl.append(run(base_eng, toks)[0])
                t, loaded = run(eng, toks)
                hit.append(t)
            s1 = eng.stats()["connector"]
            lb, lns = s1["load_bytes"] - s0["load_bytes"], s1["load_ns"] - s0["load_ns"]
            tc, th = statistics.median(comp), statistics.median(hit)
            if bl:
                base[n] = statistics.median(bl)
            rows.append(dict(tokens=n, loaded_tokens=loaded, cold_s=cold, computed_s=tc,
                             kvtier_s=th, computed_all=comp, kvtier_all=hit,
                             baseline_all=bl, speedup=tc / th, prefill_tok_s=n / tc,
                             load_bytes_per_run=lb // a.reps,
                             load_gbs=lb / lns if lns else None,
                             load_ms_per_run=lns / a.reps / 1e6))
    finally:
        eng.close()
        if base_eng is not None:
            base_eng.close()

    m = vs.MODEL
    n_params = (m["vocab_size"] * m["hidden_size"] * 2 + m["num_hidden_layers"] * (
        m["hidden_size"] * m["head_dim"] * (m["num_attention_heads"] * 2 +
                                             m["num_key_value_heads"] * 2) +
        3 * m["hidden_size"] * m["intermediate_size"]))
    print(f"model: Llama, {m['num_hidden_layers']} layers, hidden {m['hidden_size']}, "
          f"{m['num_attention_heads']} heads / {m['num_key_value_heads']} KV heads of "
          f"{m['head_dim']}, FFN {m['intermediate_size']}, vocab {m['vocab_size']}, "
          f"{n_params / 1e6:.1f} M parameters, bf16, random weights")
    print(f"KV: {st['kv_bytes_per_token']} bytes per token, blocks of {st['block_tokens']} "
          f"tokens ({st['block_bytes']} bytes, {st['layers']} parts); store options {opts}")
    print(f"engine: vllm-cpu 0.32.0, enforce_eager, prefix cache off, startup {startup:.0f} s; "
          f"machine: {os.cpu_count()} CPUs, VLLM_CPU_OMP_THREADS_BIND="
          f"{os.environ.get('VLLM_CPU_OMP_THREADS_BIND', 'auto')}, "
          f"load average {os.getloadavg()[0]:.1f} at the end")
    print(f"medians of {a.reps} alternating runs; TTFT = wall time of a 1-token request; "
          f"cold = first run, computed and stored\n")
    hdr = ("| prompt tokens | from kvtier | cold (store) ms | computed ms, median (min) "
           "| with kvtier ms, median (min) | speedup of medians | prefill tok/s "
           "| load MB/run | load ms/run | load GB/s |"
           + (" no connector ms, median (min) |" if base else ""))
    print(hdr)
    print("|" + " --- |" * (hdr.count("|") - 1))
    for r in rows:
        line = (f"| {r['tokens']} | {r['loaded_tokens']} | {r['cold_s'] * 1e3:.0f} | "
                f"{r['computed_s'] * 1e3:.0f} ({min(r['computed_all']) * 1e3:.0f}) | "
                f"{r['kvtier_s'] * 1e3:.0f} ({min(r['kvtier_all']) * 1e3:.0f}) | "
                f"{r['speedup']:.1f}x | {r['prefill_tok_s']:.0f} | "
                f"{r['load_bytes_per_run'] / 1e6:.1f} | {r['load_ms_per_run']:.1f} | "
                f"{r['load_gbs']:.2f} |")
        if base:
            line += f" {base[r['tokens']] * 1e3:.0f} ({min(r['baseline_all']) * 1e3:.0f}) |"
        print(line)
    print()
    for r in rows:
        print(json.dumps(dict(r, baseline_s=base.get(r["tokens"]), startup_s=startup,
                              kv_bytes_per_token=st["kv_bytes_per_token"],
                              date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))))


if __name__ == "__main__":
    main()

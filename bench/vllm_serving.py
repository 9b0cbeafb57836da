#!/usr/bin/env python3
"""vllm_serving.py - vLLM serving multi-turn conversations, with and without
kvtier, the connector's loads and stores synchronous or asynchronous.

Usage (from the repository root, after a build with -Dvllm=true, or any
build plus --build):

    python3 bench/vllm_serving.py --build build-release --trace TRACE.jsonl
        [--convs 8] [--turns 3] [--scale 16] [--max-out 8] [--num-blocks 40]
        [--rounds 3] [--modes vllm,sync,async]

The serving mode of the vLLM benchmarks (bench/vllm_ttft.py times one
request at a time).  Conversations come from a trace's prefix structure:
a Mooncake-format JSON Lines trace (timestamp, input_length,
output_length, hash_ids: one id per 512-token block, equal ids meaning an
equal prefix).  Requests whose first block id is the same are one
conversation, in trace order; the --convs conversations with the most
turns (whose prompts fit the engine) are served, turn by turn: turn k of
every conversation submitted at once (vLLM batches them), then turn k+1.
Each trace block becomes --scale tokens (prompts scaled by scale/512: the
CPU engine is slow), the same tokens for the same block id, so prompts
share exactly the prefixes the trace says; outputs are --max-out tokens
(greedy, EOS ignored).  Each round of each mode uses other tokens (a seed
per round and mode), so every round starts cold, in vLLM and in kvtier.
vLLM's KV cache is --num-blocks blocks of 128 tokens, small enough that a
conversation's earlier turns are evicted from it before its next turn
comes.

Modes, one engine each, started one after the other (vLLM's prefix cache
on in all):
  vllm   no connector: what vLLM alone recomputes
  sync   kvtier, loads and stores synchronous (kvtier.load_async never,
         kvtier.store_async off, no prefetch): the v1 connector's path
  async  kvtier in its default modes (stores asynchronous, loads
         asynchronous when below DRAM, prefetch at lookup)
kvtier's store: its own DRAM (--dram) over a kvtierd (DRAM and SSD) on
127.0.0.1, started here.  With the default 64M every block of these runs
stays in the engine's DRAM (loads are DRAM copies); --dram 4M (32 blocks
of 128 KiB) puts most loads below it, on the kvtierd: there the async
mode's loads are asynchronous and prefetched at lookup.

Reported per mode, medians over rounds: output tokens/s (all output
tokens over the wall time of all turns), TTFT p50/p99 (submission to first
token), inter-token latency p50/p99 (between a request's consecutive
tokens, as the engine steps return them), and the throughput ratio
against vLLM alone.
"""
import argparse
import collections
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python", "tests"))
import vllm_support as vs  # noqa: E402

BS = 128
TRACE_BLOCK = 512


def conversations(trace, n, turns, scale, max_len):
    """n conversations of `turns` turns: lists of (hash_ids, input tokens,
    output tokens), scaled."""
    by_first = collections.OrderedDict()
    with open(trace) as f:
        for line in f:
            r = json.loads(line)
            if r.get("hash_ids"):
                by_first.setdefault(r["hash_ids"][0], []).append(r)
    convs = []
    for reqs in sorted(by_first.values(), key=len, reverse=True):
        if len(reqs) < turns:
            break
        c = []
        for r in reqs[:turns]:
            n_in = max(1, r["input_length"] * scale // TRACE_BLOCK)
            if n_in + 64 > max_len:
                break
            c.append((r["hash_ids"], n_in))
        if len(c) == turns:
            convs.append(c)
        if len(convs) == n:
            break
    if len(convs) < n:
        raise SystemExit(f"the trace has only {len(convs)} conversations of {turns} turns "
                         f"that fit {max_len} tokens at scale {scale}")
    return convs


def tokens(hash_ids, n_in, scale, seed):
    out = []
    for h in hash_ids:
        rng = random.Random(h * 1_000_003 + seed)
        out.extend(rng.randrange(3, vs.MODEL["vocab_size"]) for _ in range(scale))
        if len(out) >= n_in:
            break
    return out[:n_in]


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def serve_round(eng, convs, a, seed):
    ttft, itl, n_out, wall, loaded = [], [], 0, 0.0, 0
    for k in range(a.turns):
        prompts = [{"prompt_token_ids": tokens(c[k][0], c[k][1], a.scale, seed),
                    "max_tokens": a.max_out} for c in convs]
        r = eng.call(op="serve", prompts=prompts)
        wall += r["wall_s"]
        for res in r["results"]:
            t = res["t"]
            n_out += len(t)
            if t:
                ttft.append(t[0])
                itl.extend(b - a_ for a_, b in zip(t, t[1:]))
            loaded += (res["kv_transfer_params"] or {}).get("kvtier_loaded_tokens", 0)
    return dict(tok_s=n_out / wall, ttft_p50=pct(ttft, 50), ttft_p99=pct(ttft, 99),
                itl_p50=pct(itl, 50), itl_p99=pct(itl, 99), wall_s=wall, out_tokens=n_out,
                loaded_tokens=loaded)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True, help="meson build dir (holds python/kvtier)")
    ap.add_argument("--trace", required=True, help="Mooncake-format JSON Lines trace")
    ap.add_argument("--convs", type=int, default=8)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--scale", type=int, default=16, help="tokens per 512-token trace block")
    ap.add_argument("--max-out", type=int, default=8)
    ap.add_argument("--num-blocks", type=int, default=40, help="vLLM's KV cache, in blocks")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--modes", default="vllm,sync,async")
    ap.add_argument("--dram", default="64M", help="the engine store's DRAM tier")
    ap.add_argument("--kvtierd", default=None, help="default: BUILD/daemon/kvtierd")
    ap.add_argument("--dir", default=None, help="work dir (default: a temporary one)")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    build_py = os.path.join(build, "python")
    py = vs.venv(build_py)
    work = a.dir or tempfile.mkdtemp(prefix="kvtier-vllm-serving.")
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "model")
    if not os.path.exists(os.path.join(model, "model.safetensors")):
        subprocess.run([py, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                        "import vllm_support; vllm_support.write_model(sys.argv[2])",
                        os.path.join(ROOT, "python", "tests"), model], check=True)
    max_len = min((a.num_blocks - 1) * BS, 8192)  # vLLM wants a spare block
    convs = conversations(a.trace, a.convs, a.turns, a.scale, max_len)
    env = {"PYTHONPATH": os.pathsep.join([build_py, os.path.join(ROOT, "python", "tests")]),
           "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    srv = vs.Kvtierd(a.kvtierd or os.path.join(build, "daemon", "kvtierd"), work)
    rows = {}
    try:
        for m_i, mode in enumerate(a.modes.split(",")):
            extra = None
            if mode != "vllm":
                extra = {"kvtier.options": {"dram.capacity": a.dram, "dram.prefault": "off",
                                            "remote.addr": srv.addr}}
                if mode == "sync":
                    extra.update({"kvtier.load_async": "never", "kvtier.store_async": "0",
                                  "kvtier.prefetch": "0"})
            eng = vs.Engine(py, model, os.path.join(work, f"engine-{mode}.log"),
                            kvtier_extra=extra, engine_id=f"kvtier-serving-{os.getpid()}-{mode}",
                            max_model_len=max_len, prefix_caching=True, env=env,
                            num_blocks=a.num_blocks)
            try:
                # Tokens of their own per mode and round: the kvtierd is
                # shared, and a mode must not find the blocks of another.
                rounds = [serve_round(eng, convs, a, seed=1000 * (i + 1) + 100 * m_i)
                          for i in range(a.rounds)]
                st = eng.stats()["connector"] if extra else None
            finally:
                eng.close()
            med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
            rows[mode] = dict(med, rounds=rounds, startup_s=eng.ready["startup_s"],
                              connector=st)
            print(f"{mode}: {json.dumps(rows[mode]['rounds'])}", file=sys.stderr)
    finally:
        srv.stop()

    n_prompt = [c[k][1] for c in convs for k in range(a.turns)]
    print(f"{a.convs} conversations x {a.turns} turns from {os.path.basename(a.trace)} "
          f"(scale {a.scale}/512: prompts {min(n_prompt)}..{max(n_prompt)} tokens, "
          f"{a.max_out} output tokens each); vLLM KV cache {a.num_blocks} blocks of {BS} "
          f"tokens; kvtier: DRAM {a.dram} over a kvtierd; medians of {a.rounds} rounds; "
          f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end\n")
    base = rows.get("vllm", {}).get("tok_s")
    print("| mode | output tok/s | vs vLLM alone | TTFT p50 ms | TTFT p99 ms | ITL p50 ms "
          "| ITL p99 ms | tokens from kvtier per round |")
    print("|" + " --- |" * 8)
    for mode, r in rows.items():
        ratio = f"{r['tok_s'] / base:.2f}x" if base else "-"
        print(f"| {mode} | {r['tok_s']:.1f} | {ratio} | {r['ttft_p50'] * 1e3:.0f} | "
              f"{r['ttft_p99'] * 1e3:.0f} | {r['itl_p50'] * 1e3:.0f} | "
              f"{r['itl_p99'] * 1e3:.0f} | {r['loaded_tokens']:.0f} |")
    print()
    for mode, r in rows.items():
        print(json.dumps(dict(mode=mode, **{k: v for k, v in r.items() if k != "rounds"},
                              date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))))


if __name__ == "__main__":
    main()

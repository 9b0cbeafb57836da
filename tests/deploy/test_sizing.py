#!/usr/bin/env python3
"""test_sizing.py - doc/deploy.md "Sizing": `kvtier replay` sweeping DRAM and
SSD sizes with --plot, scaled down to a synthetic trace (seconds).

Usage: test_sizing.py KVTIER WORK-DIR.  Runs `kvtier replay --synth=300
--dram 1M,4M --ssd 0,64M --plot FILE --json` and checks one sweep line per
(DRAM, SSD) pair, every hit ratio at most the unlimited cache's, more
DRAM never hitting less on this trace (DRAM alone: deterministic), and
one point per run in the SVG.
"""
import json
import os
import subprocess
import sys


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def main():
    kvtier, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    os.makedirs(work, exist_ok=True)
    svg = os.path.join(work, "sizing.svg")
    r = subprocess.run([kvtier, "replay", "--synth=300", "--dram", "1M,4M", "--ssd", "0,64M",
                        "--plot", svg, "--dir", work, "--no-progress", "--json"],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        fail(f"exit {r.returncode}: {r.stderr[-2000:]}")
    rows = [json.loads(l) for l in r.stdout.splitlines() if '"kind":"sweep"' in l]
    got = {(x["dram_bytes"], x["ssd_bytes"]): x["block_hit_ratio"] for x in rows}
    want = {(d << 20, s << 20) for d in (1, 4) for s in (0, 64)}
    if set(got) != want:
        fail(f"sweep points {sorted(got)}")
    for x in rows:
        if not 0 < x["block_hit_ratio"] <= x["ideal_block_hit_ratio"]:
            fail(f"hit ratio {x}")
    # DRAM alone is deterministic (one thread, a fixed trace); with an SSD
    # tier write-downs are asynchronous, so only the DRAM-only pair is
    # compared.
    if got[(4 << 20, 0)] < got[(1 << 20, 0)]:
        fail(f"more DRAM hit less: {got}")
    if open(svg).read().count("<circle") != 4:
        fail("the plot does not have one point per run")
    for (d, s), h in sorted(got.items()):
        print(f"dram {d >> 20}M ssd {s >> 20}M: block hit ratio {h:.3f}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""shared_gc.py - what "kvtier gc --dir" costs on a big shared directory:
seconds and the process's peak RSS, for one or more kvtier binaries on
copies of the same tree (doc/shared.md "Capacity: budget and age").

Usage: bench/shared_gc.py FILES KVTIER [KVTIER ...]     (e.g. 200000 a/kvtier b/kvtier)

Builds a tree of FILES block files of 100 bytes under $TMPDIR, in the
layout of a shared directory (kvt1/<ns>/<ab>/<cd>/<hash>), with mtimes
spread over 58 days, then for each binary a copy of it and
`KVTIER gc --dir COPY --budget B --json` with B half the tree's bytes;
prints seconds, peak RSS (GNU time's %M) and gc's counts per binary,
and the same binary's RSS with an empty tree (the process alone).
Python's standard library only.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def make_tree(root, n):
    now = time.time()
    ns = root + "/kvt1/" + "a" * 64
    for i in range(n):
        h = "%064x" % (i * 0x9E3779B97F4A7C15 % (1 << 256))
        d = "%s/%s/%s" % (ns, h[:2], h[2:4])
        os.makedirs(d, exist_ok=True)
        p = d + "/" + h
        with open(p, "wb") as f:
            f.write(b"x" * 100)
        t = now - (i * 37 % 5000000)
        os.utime(p, (t, t))


def run(cli, tree, budget):
    """Seconds, peak RSS in KiB (GNU time's %M: wait4 of the exec'd
    process, not of a fork of this one) and gc's counts."""
    t0 = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-f", "@@%M", cli, "gc", "--dir", tree, "--budget",
                        str(budget), "--json"], capture_output=True, text=True,
                       env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0"))
    dt = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit("%s gc: status %d: %s" % (cli, p.returncode, p.stderr))
    rss = int(p.stderr.rsplit("@@", 1)[1])
    return dt, rss, json.loads(p.stdout)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    n, clis = int(sys.argv[1]), sys.argv[2:]
    base = tempfile.mkdtemp(dir=os.environ.get("TMPDIR"))
    try:
        tree = base + "/tree"
        t0 = time.monotonic()
        make_tree(tree, n)
        print("tree: %d files in %.0f s" % (n, time.monotonic() - t0), flush=True)
        os.makedirs(base + "/empty/kvt1")
        for cli in clis:
            copy = base + "/copy"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(tree, copy)
            os.sync()
            _, rss0, _ = run(cli, base + "/empty", 1)
            dt, rss, res = run(cli, copy, n * 100 // 2)
            print("%s: %.1f s, peak RSS %d KiB (%d KiB with no tree), removed %d of %d"
                  % (cli, dt, rss, rss0, res["removed_files"], res["files"]), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

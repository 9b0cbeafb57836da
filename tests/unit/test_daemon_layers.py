#!/usr/bin/env python3
"""kvtierd's files form no cycle, and its loop knows no protocol.

From the objects' symbols (nm): file A depends on file B when A uses a
global that B defines.  Fails on any cycle among daemon/*.c, and on
loop.c using anything that a protocol file (native, ops, value, wire,
respd, httpd) defines: the loop reaches protocols only through the
protocol table (daemon/kvtierd.h).  Issue 18 item 4; doc/kvtierd.md.

usage: test_daemon_layers.py BUILD/daemon/kvtierd.p
"""
import glob
import os
import subprocess
import sys

PROTOCOL_FILES = {"native", "ops", "value", "wire", "respd", "httpd"}


def symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "TDBRC":
            defined.add(f[2])
        elif len(f) == 2 and f[0] == "U":
            used.add(f[1])
    return defined, used


def cycles(edges):
    index, low, stack, on, comps, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return comps


def main():
    objs = sorted(glob.glob(os.path.join(sys.argv[1], "*.o")))
    if len(objs) < 10:
        print("too few objects in", sys.argv[1])
        return 1
    syms = {os.path.basename(o).split(".")[0]: symbols(o) for o in objs}
    edges = {a: set() for a in syms}
    why = {}
    for a, (_, used) in syms.items():
        for b, (defined, _) in syms.items():
            common = used & defined
            if a != b and common:
                edges[a].add(b)
                why[(a, b)] = sorted(common)
    bad = 0
    for comp in cycles(edges):
        print("cycle among daemon files:", " ".join(comp))
        for a in comp:
            for b in comp:
                if (a, b) in why:
                    print(f"  {a} -> {b}: {', '.join(why[(a, b)][:5])}")
        bad += 1
    for b in sorted(edges.get("loop", set()) & PROTOCOL_FILES):
        print(f"loop.c calls protocol file {b}.c: {', '.join(why[('loop', b)])}")
        bad += 1
    if "loop" not in syms or "native" not in syms:
        print("loop.o or native.o missing")
        bad += 1
    for a in sorted(edges):
        print(f"{a:10} -> {' '.join(sorted(edges[a]))}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

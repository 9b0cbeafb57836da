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
import importlib.util
import os
import sys

PROTOCOL_FILES = {"native", "ops", "value", "wire", "respd", "httpd"}

# The object graph (nm, edges, Tarjan) is scripts/check-layers.py's.
_spec = importlib.util.spec_from_file_location(
    "check_layers", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                 "..", "..", "scripts", "check-layers.py"))
layers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(layers)


def main():
    objs = sorted(glob.glob(os.path.join(sys.argv[1], "*.o")))
    if len(objs) < 10:
        print("too few objects in", sys.argv[1])
        return 1
    names, defs, uses = layers.read(objs, name=lambda o: o.split(".")[0])
    edges, why = layers.graph(defs, uses)
    names |= {os.path.basename(o).split(".")[0] for o in objs}
    edges = {a: edges.get(a, set()) for a in names}
    bad = 0
    for comp in (c for c in layers.sccs(names, edges) if len(c) > 1):
        print("cycle among daemon files:", " ".join(comp))
        for a in comp:
            for b in comp:
                if (a, b) in why:
                    print(f"  {a} -> {b}: {', '.join(sorted(why[(a, b)])[:5])}")
        bad += 1
    for b in sorted(edges.get("loop", set()) & PROTOCOL_FILES):
        print(f"loop.c calls protocol file {b}.c: {', '.join(sorted(why[('loop', b)]))}")
        bad += 1
    if "loop" not in names or "native" not in names:
        print("loop.o or native.o missing")
        bad += 1
    for a in sorted(edges):
        print(f"{a:10} -> {' '.join(sorted(edges[a]))}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

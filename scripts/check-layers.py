#!/usr/bin/env python3
"""check-layers.py - the library's object graph has no cycle, calls go only
down the layers of lib/'s folders, and the tiers below DRAM call only the
DRAM tier's lower-tier interface.

Usage: check-layers.py LIBKVTIER.a [--compdb compile_commands.json]
                       [--allow-cycle a,b ...]

Reads every member of the static library with `nm`, draws an edge a -> b
when object a references a global symbol that object b defines, and finds
the strongly connected components (Tarjan).  A component of more than one
object is a cycle: printed with the symbols that make each edge, and the
test fails (exit 1), unless the component is exactly one listed with
--allow-cycle.  Each object's layer is its folder under lib/ (its member
path, lib/<layer>/libkvt_<layer>.a.p/x.c.o, from lib/meson.build): an
edge to an object of a layer that SEES does not list for its own fails,
as does an object in no known layer (a new folder goes into SEES and
lib/meson.build together).  The folders' include_directories already
stop an upward #include from compiling; this catches what a declaration
in a lower header (kvt_int.h declares ns.c's and quota.c's functions)
lets through, and a sibling tier calling another.  Then checks that the
tier implementations (lib/core/dram.h's first part) and the seal
decorator reference no DRAM function outside that part.
With --compdb (the build's compile_commands.json), also checks that each
layer's sources are compiled with no lib/ include folder beyond its own,
those SEES lists and tier/ (tier.h): the guard on the guard, should a
layer's include_directories in lib/*/meson.build be widened.
Exit 0 pass, 1 fail, 77 skip (no nm).

read(), graph() and sccs() are also the object-graph code of
tests/unit/test_daemon_layers.py (kvtierd's files), which imports them.
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

# What dram.h's first part declares: the only DRAM calls lower tiers make.
DRAM_LOWER = {
    "dram_reserve", "dram_publish", "dram_abort", "dram_item_key", "dram_item_verify",
    "dram_item_alive", "dram_item_flags", "dram_pin", "dram_ref_quiet", "dram_item_view",
    "dram_unpin", "dram_item_ref", "dram_item_part_lens", "dram_writedown_done",
    "dram_forget_lower", "dram_item_meta", "dram_exists", "dram_regions",
    "dram_victim_parts",
    # a client's put through DRAM's put-if-absent (seal.c's sealed put: the
    # tiers below asked under DRAM's lock, dram_set_absent_hook)
    "dram_reserve_put",
    # installed by the tier's own open (with the hook, the victim tier's
    # size for prefix-adapt's simulations of DRAM + SSD, its room check, and
    # the plug a put's burst of victims holds on its queue)
    "dram_set_admit_hook", "dram_set_evict_hook", "dram_adapt_below", "dram_below_room",
    "dram_below_plug",
    # the close write-down through that hook, from the tier's own stop
    "dram_writedown_pass",
}
LOWER_TIERS = ("ssd", "ssd_recover", "ssd_fsck", "shared", "shdir", "shs3", "remote",
               "cluster", "seal", "tier_ssd", "tier_shared", "tier_remote")


# lib/'s layers, bottom first (lib/meson.build), and the layers each one's
# objects may call: the same as the include_directories each is compiled
# with.  The three tiers are siblings, except that the shared tier sees the
# SSD tier (its SSD evict hook).
_CORE = {"base", "fmt", "sys", "core"}
SEES = {
    "base": {"base"},
    "fmt": {"base", "fmt"},
    "sys": {"base", "fmt", "sys"},
    "core": _CORE,
    "tier_ssd": _CORE | {"tier_ssd"},
    "tier_shared": _CORE | {"tier_ssd", "tier_shared"},
    "tier_remote": _CORE | {"tier_remote"},
    "store": _CORE | {"tier_ssd", "tier_shared", "tier_remote", "store"},
}
LAYER = re.compile(r"libkvt_([a-z_]+)\.a\.p/")


def include_layers(compdb):
    """{source under lib/: (its layer, {layers of the lib/ folders on its
    include path})} for the objects of the layer libraries in a meson
    compile_commands.json."""
    out = {}
    with open(compdb, encoding="utf-8") as f:
        cmds = json.load(f)
    for c in cmds:
        lm = LAYER.search(c.get("output", "") + "/")
        if not lm:
            continue
        args = c["arguments"] if "arguments" in c else shlex.split(c["command"])
        src = os.path.normpath(os.path.join(c["directory"], c["file"]))
        seen = set()
        for i, a in enumerate(args):
            if a in ("-I", "-isystem", "-iquote") and i + 1 < len(args):
                d = args[i + 1]
            elif a.startswith("-I"):
                d = a[2:]
            else:
                continue
            d = os.path.normpath(os.path.join(c["directory"], d))
            # lib/<folder> of the source tree: the folder whose parent's
            # parent holds the source's lib/ (build dirs never match).
            m = re.search(r"/lib/((?:tier/)?[a-z_]+)$", d)
            if m and d.startswith(src[:src.rindex("/lib/")] + "/lib/"):
                seen.add(m.group(1).replace("/", "_"))
        out[src] = (lm.group(1), seen)
    return out


def short(member):
    """store.c.o, lib/store/libkvt_store.a.p/store.c.o -> store"""
    m = re.search(r"(?:^lib_)?([A-Za-z0-9_]+)\.c\.o$", member)
    return m.group(1) if m else member


# nm -A: "lib.a:member.o: ADDR T sym" for a normal archive,
# "lib.a:dir/member.o: ..." for a thin one (meson's internal libraries),
# "dir/file.o: ..." for object files.
LINE = re.compile(r"^(?:.*?\.a:)?([^:]+\.o):\s*(?:[0-9a-fA-F]+\s+)?([A-Za-z])\s+(\S+)$")


def read(files, name=short, layers=None):
    """Objects, {symbol: defining object}, {object: symbols it references},
    from `nm` of a static library or object files (a path or a list of
    paths); name(member) names each object.  A dict given as layers gets
    {object: its lib/ layer, or None} from the member paths."""
    defs, uses, objs = {}, {}, set()
    files = [files] if isinstance(files, str) else list(files)
    out = subprocess.run(["nm", "-A", "-g", *files], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        obj, kind, sym = name(os.path.basename(m.group(1))), m.group(2), m.group(3)
        objs.add(obj)
        if layers is not None:
            lm = LAYER.search(m.group(1))
            layers[obj] = lm.group(1) if lm else None
        if kind == "U":
            uses.setdefault(obj, set()).add(sym)
        elif kind not in "wv":
            defs.setdefault(sym, obj)
    return objs, defs, uses


def graph(defs, uses):
    """Edges a -> b (a uses a global b defines) and {(a, b): those symbols}."""
    edges, why = {}, {}
    for a, syms in uses.items():
        for sym in syms:
            b = defs.get(sym)
            if b and b != a:
                edges.setdefault(a, set()).add(b)
                why.setdefault((a, b), set()).add(sym)
    return edges, why


def sccs(nodes, edges):
    """Strongly connected components (Tarjan), each sorted."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
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
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    if not shutil.which("nm"):
        print("no nm: skipped")
        return 77
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        print("usage: check-layers.py LIBKVTIER.a [--compdb compile_commands.json] "
              "[--allow-cycle a,b ...]", file=sys.stderr)
        return 2
    archive = sys.argv[1]
    allowed = set()
    compdb = None
    args = sys.argv[2:]
    while args:
        if args[0] == "--allow-cycle" and len(args) > 1:
            allowed.add(tuple(sorted(x.strip() for x in args[1].split(","))))
            args = args[2:]
        elif args[0] == "--compdb" and len(args) > 1:
            compdb = args[1]
            args = args[2:]
        else:
            print("usage: check-layers.py LIB.a [--compdb FILE] [--allow-cycle a,b,...]",
                  file=sys.stderr)
            return 2
    layers = {}
    objs, defs, uses = read(archive, layers=layers)
    edges, why = graph(defs, uses)
    fail = False
    if compdb:
        srcs = include_layers(compdb)
        if not srcs:
            print(f"no layer library's source in {compdb}")
            fail = True
        for src, (layer, seen) in sorted(srcs.items()):
            may = SEES.get(layer, set()) | ({"tier"} if layer.startswith(("tier_", "store"))
                                            else set())
            extra = sorted(seen - may)
            if extra:
                print(f"INCLUDE: {src} ({layer}) is compiled with lib/ folders above "
                      f"it: {', '.join(extra)}")
                fail = True
        print(f"{len(srcs)} sources' include folders checked")
    for a in sorted(objs):
        if layers.get(a) not in SEES:
            print(f"LAYER: {a} is in no known layer ({layers.get(a)}): "
                  "lib/meson.build and SEES list the folders")
            fail = True
    for a in sorted(edges):
        for b in sorted(edges[a]):
            la, lb = layers.get(a), layers.get(b)
            if la in SEES and lb not in SEES.get(la, ()):
                print(f"LAYER: {a} ({la}) calls {b} ({lb}): "
                      f"{', '.join(sorted(why[(a, b)])[:6])}")
                fail = True
    comps = [c for c in sccs(objs, edges) if len(c) > 1]
    for comp in comps:
        known = tuple(comp) in allowed
        print(("known cycle (allowed): " if known else "CYCLE: ") + " ".join(comp))
        for a in comp:
            for b in sorted(edges.get(a, ())):
                if b in comp:
                    print(f"  {a} -> {b}: {', '.join(sorted(why[(a, b)])[:6])}")
        fail |= not known
    if not objs:
        print(f"no object read from {archive}")
        return 1
    for a in LOWER_TIERS:
        bad = sorted(s for s in uses.get(a, ()) if defs.get(s) == "dram" and s not in DRAM_LOWER)
        if bad:
            print(f"LAYER: {a} calls DRAM outside dram.h's lower-tier part: {', '.join(bad)}")
            fail = True
    for a in sorted(objs):
        if a in LOWER_TIERS and any(defs.get(s, "").startswith("store") for s in uses.get(a, ())):
            print(f"LAYER: tier {a} calls the store")
            fail = True
    print(f"{len(objs)} objects in {len(set(layers.values()))} layers, "
          f"{sum(len(v) for v in edges.values())} edges, {len(comps)} cycle(s)")
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())

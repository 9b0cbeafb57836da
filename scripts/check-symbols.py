#!/usr/bin/env python3
"""check-symbols.py LIB... - every defined global symbol a library exports
is kvt_*: for a static library (.a) the globals of its objects (nm -g), for
a shared one its dynamic symbols (nm -D).  Prints each offender and exits 1;
0 when all are clean; 77 when there is no nm.

Left out, as the toolchain adds them and no program can collide with them:
the shared library's version node (type A), and symbols whose names start
with "__" (sanitizer and compiler runtime hooks, reserved to the
implementation by the C standard).
"""
import shutil
import subprocess
import sys


def exported(path):
    dyn = not path.endswith(".a")
    cmd = ["nm", "-D" if dyn else "-g", "--defined-only", path]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    names = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue  # archive member headers, blank lines
        kind, name = parts[-2], parts[-1]
        if kind == "A" or name.startswith("__"):
            continue
        names.append(name)
    return names


def main():
    if not shutil.which("nm"):
        print("no nm: skipped")
        return 77
    bad = 0
    for path in sys.argv[1:]:
        names = exported(path)
        others = sorted(n for n in names if not n.startswith("kvt_"))
        print(f"{path}: {len(names)} exported, {len(others)} not kvt_*")
        for n in others:
            print(f"  {n}")
        bad += len(others)
        if not names:
            print(f"{path}: exports nothing: wrong file?")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

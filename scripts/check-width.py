#!/usr/bin/env python3
"""check-width.py - lib/ and daemon/ stay within 100 columns (tabs of 8).

Usage: check-width.py SOURCE-ROOT

Every .c and .h file under lib/ and daemon/: a line past 100 columns fails,
unless it holds a string literal (a log or error message, kept whole so
that grep finds it).  Prints each line past and exits 1 if there is one.
"""
import os
import sys

WIDTH = 100


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    bad = 0
    for top in ("lib", "daemon"):
        for d, _, files in sorted(os.walk(os.path.join(root, top))):
            for name in sorted(files):
                if not name.endswith((".c", ".h")):
                    continue
                path = os.path.join(d, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for n, line in enumerate(f, 1):
                        line = line.rstrip("\n")
                        cols = len(line.expandtabs(8))
                        if cols > WIDTH and '"' not in line:
                            print(f"{os.path.relpath(path, root)}:{n}: {cols} columns "
                                  f"(at most {WIDTH}, tabs of 8; string literals excepted)")
                            bad += 1
    if bad:
        print(f"check-width: {bad} lines past {WIDTH} columns")
        return 1
    print(f"check-width: lib/ and daemon/ within {WIDTH} columns")
    return 0


if __name__ == "__main__":
    sys.exit(main())

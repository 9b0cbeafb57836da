#!/usr/bin/env python3
"""check-doc-refs.py SRC - every Markdown file the documentation cites
(doc/*.md, doc/man/*, README.md, include/*.h, bench/*.c, bench/RESULTS.md)
exists in the repository, next to the citing file, under doc/ or at the
root.  A citation of the design brief kept outside the repository
(design.md) resolved nowhere a reader of the repository could follow it;
doc/design-notes.md now holds what the docs cite of it.

A name the same file also gives with its provenance ("shared/X.md",
"../shared/data/X.md": the team's notes and data, outside the
repository) is a note of where a figure came from, not a citation to
follow, and is allowed.

Prints each problem; exit 0 pass, 1 fail.
"""
import glob
import os
import re
import sys

REF = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w-]+\.md)\b")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    files = (sorted(glob.glob(os.path.join(root, "doc", "*.md")))
             + sorted(glob.glob(os.path.join(root, "doc", "man", "*.[0-9]")))
             + [os.path.join(root, "README.md")]
             + sorted(glob.glob(os.path.join(root, "include", "*.h")))
             + sorted(glob.glob(os.path.join(root, "bench", "*.c")))
             + [os.path.join(root, "bench", "RESULTS.md")])
    problems = 0
    for f in files:
        if not os.path.exists(f):
            continue
        text = open(f, encoding="utf-8", errors="replace").read()
        text = re.sub(r"\\f[BIRP]", " ", text)  # man page fonts
        shared = {os.path.basename(m.group(1)) for m in REF.finditer(text)
                  if re.match(r"(\.\./)?shared/", m.group(1))}
        for m in REF.finditer(text):
            ref = m.group(1)
            if re.match(r"(\.\./)?shared/", ref) or os.path.basename(ref) in shared:
                continue
            where = [os.path.join(root, ref), os.path.join(root, "doc", ref),
                     os.path.join(os.path.dirname(f), ref)]
            if not any(os.path.exists(w) for w in where):
                line = text.count("\n", 0, m.start()) + 1
                print(f"{os.path.relpath(f, root)}:{line}: cites {ref}, "
                      "which is not in the repository")
                problems += 1
    print(f"check-doc-refs: {len(files)} files, {problems} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

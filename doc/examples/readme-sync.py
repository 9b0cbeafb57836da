#!/usr/bin/env python3
"""Fail unless README.md shows quickstart.c verbatim (the test
'example_quickstart_readme'): the README's example must be code that builds
and runs, and this keeps the two from drifting apart.

usage: readme-sync.py README.md quickstart.c
"""
import re
import sys

readme, example = sys.argv[1], sys.argv[2]
with open(readme, encoding="utf-8") as f:
    blocks = re.findall(r"^```c\n(.*?)^```$", f.read(), re.S | re.M)
with open(example, encoding="utf-8") as f:
    code = f.read()
if code in blocks:
    sys.exit(0)
print(f"{readme}: no ```c block equal to {example}; paste the file into it", file=sys.stderr)
sys.exit(1)

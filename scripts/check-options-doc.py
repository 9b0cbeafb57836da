#!/usr/bin/env python3
"""check-options-doc.py KVTIER KVTIER_H - every option of the library's
table (what `kvtier options` prints, from kvt_option_info) is documented in
the manual of kvt_store_set_option in kvtier.h.  The table is the one
source of names, types, bounds and defaults; the header's prose must not
fall behind it.  Exit 0 pass, 1 fail, 2 usage.

    python3 scripts/check-options-doc.py build/cli/kvtier include/kvtier.h
"""
import re
import subprocess
import sys


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    cli, header = sys.argv[1], sys.argv[2]
    out = subprocess.run([cli, "options"], capture_output=True, text=True, check=True).stdout
    names = [line.split()[0] for line in out.splitlines()[1:] if line.strip()]
    text = open(header, encoding="utf-8").read()
    start = text.index(" * Set one option by name from its text value")
    end = text.index("int kvt_store_set_option(")
    manual = text[start:end]
    missing = [n for n in names if not re.search(r"(?<![\w.])" + re.escape(n) + r"(?![\w])", manual)]
    print(f"{len(names)} options in the table, {len(missing)} missing from kvtier.h")
    for n in missing:
        print(f"  {n}")
    return 1 if missing or len(names) < 10 else 0


if __name__ == "__main__":
    sys.exit(main())

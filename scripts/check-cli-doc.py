#!/usr/bin/env python3
"""check-cli-doc.py KVTIER KVTIERD SRC - every command-line option of the
two programs is documented where an operator looks for it, and every
option the documentation names exists.  (check-options-doc.py does the
same for the library's options and kvtier.h.)

kvtierd: the options the code takes (daemon/config.c,
kvtd_config_is_option) are the options `kvtierd --help` lists, each is in
kvtierd(8) and in doc/kvtierd.md, and kvtierd(8) names no other.

kvtier: every long option its code takes (the getopt tables and the
hand parsers of cli/ and bench/) is in some `--help` and in some man
page; each command's `--help` options (its usage and option lines) are
in its man page; every command of `kvtier --help` is in kvtier(1), every
bench suite in kvtier(1) and kvtier-bench(1).

Prints each problem; exit 0 pass, 1 fail, 2 usage.
"""
import glob
import os
import re
import subprocess
import sys

OPT = r"(?<![\w-])--([a-z][a-z0-9-]*)"

# The man page of each kvtier command (kvtier(1) covers the small ones).
PAGES = {
    "kvtier-admin.1": ["stat", "top", "ls", "get", "put", "rm", "clear", "fsck", "who", "drain"],
    "kvtier-replay.1": ["replay"],
    "kvtier.1": ["gc", "options", "version"],
}


def run(*args):
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=60)
    return r.stdout + r.stderr


def man(src, page):
    return open(os.path.join(src, "doc", "man", page), encoding="utf-8").read().replace("\\-", "-")


def own_options(helptext):
    """The options a --help text gives as its command's own: those of its
    usage lines (up to the first blank line) and of the lines that start
    with one (indented, maybe after -x,), not those its prose mentions."""
    head = helptext.split("\n\n", 1)[0]
    names = set(re.findall(OPT, head))
    for line in helptext.splitlines():
        m = re.match(r"^\s+(?:-\w,\s*)?--([a-z][a-z0-9-]*)", line)
        if m:
            names.add(m.group(1))
    return names - {"help"}


def check_kvtierd(kvtierd, src, problems):
    conf = open(os.path.join(src, "daemon", "config.c"), encoding="utf-8").read()
    table = re.search(r"bool kvtd_config_is_option\(.*?\{(.*?)NULL", conf, re.S).group(1)
    code = set(re.findall(r'"([a-z][a-z0-9-]*)"', table))
    helped = own_options(run(kvtierd, "--help")) - {"version"}
    page = man(src, "kvtierd.8")
    in_page = set(re.findall(OPT, page))
    md = open(os.path.join(src, "doc", "kvtierd.md"), encoding="utf-8").read()
    if len(code) < 30:
        problems.append(f"only {len(code)} options parsed from daemon/config.c")
    for o in sorted(code - helped):
        problems.append(f"kvtierd --{o}: taken by daemon/config.c, not in kvtierd --help")
    for o in sorted(helped - code):
        problems.append(f"kvtierd --{o}: in kvtierd --help, not taken by daemon/config.c")
    for o in sorted(code - in_page):
        problems.append(f"kvtierd --{o}: not in doc/man/kvtierd.8")
    for o in sorted(in_page - code - {"help", "version"}):
        problems.append(f"doc/man/kvtierd.8 names --{o}, which kvtierd does not take")
    for o in sorted(code):
        if not re.search(r"`--" + re.escape(o) + r"[` =]", md):
            problems.append(f"kvtierd --{o}: not in doc/kvtierd.md")
    return len(code)


def check_kvtier(kvtier, src, problems):
    top = run(kvtier, "--help")
    commands = re.findall(r"^  ([a-z]+) {2,}", top.split("Commands:", 1)[1], re.M)
    suites_text = run(kvtier, "bench", "--help")
    suites = re.findall(r"^  ([a-z0-9]+) {2,}", suites_text.split("Suites:", 1)[1], re.M)
    if len(commands) < 10 or len(suites) < 5:
        problems.append(f"parsed {len(commands)} commands, {len(suites)} bench suites")
    helps = {c: run(kvtier, c, "--help") for c in commands if c != "bench"}
    for s in suites:
        helps["bench " + s] = run(kvtier, "bench", s, "--help")
    helps["bench cluster --heal"] = run(kvtier, "bench", "cluster", "--heal", "--help")
    pages = dict(PAGES)
    pages["kvtier-bench.1"] = [c for c in helps if c.startswith("bench ")]

    kvtier1 = man(src, "kvtier.1")
    section = kvtier1.split(".SH COMMANDS", 1)[1].split(".SH", 1)[0]
    heads = " ".join(re.findall(r"^\.T[PQ]\n(.*)$", section, re.M))
    for c in commands:
        if not re.search(r"(?<![\w-])" + re.escape(c) + r"\b", heads):
            problems.append(f"kvtier {c}: in kvtier --help, not in kvtier(1)'s COMMANDS")
    bench1 = man(src, "kvtier-bench.1")
    for s in suites:
        if not re.search(r"\b" + re.escape(s) + r"\b", section):
            problems.append(f"kvtier bench {s}: not in kvtier(1)'s list of suites")
        if "kvtier bench " + s not in bench1:
            problems.append(f"kvtier bench {s}: not in kvtier-bench(1)")

    for page, cmds in pages.items():
        text = man(src, page)
        named = set(re.findall(OPT, text))
        for c in cmds:
            for o in sorted(own_options(helps[c]) - named):
                problems.append(f"kvtier {c} --{o}: in its --help, not in {page}")

    # What the code takes: getopt tables and hand parsers.
    code = {}
    for f in sorted(glob.glob(os.path.join(src, "cli", "*.c")) +
                    glob.glob(os.path.join(src, "bench", "*.c"))):
        t = open(f, encoding="utf-8").read()
        for n in re.findall(r'\{ *"([a-z][a-z0-9-]*)", *(?:required|no|optional)_argument', t) + \
                re.findall(r'strcmp\((?:argv\[i\]|a), "--([a-z][a-z0-9-]*)"\)', t):
            code.setdefault(n, set()).add(os.path.relpath(f, src))
    helped = set().union(*(set(re.findall(OPT, h)) for h in helps.values()))
    manned = set().union(*(set(re.findall(OPT, man(src, p))) for p in pages))
    for n in sorted(set(code) - {"help"}):
        where = ", ".join(sorted(code[n]))
        if n not in helped:
            problems.append(f"kvtier: --{n} ({where}) is in no --help")
        if n not in manned:
            problems.append(f"kvtier: --{n} ({where}) is in no man page")
    return len(code), len(helps)


def main():
    if len(sys.argv) != 4:
        print("usage: check-cli-doc.py KVTIER KVTIERD SRC (the built kvtier and kvtierd, "
              "the source root)", file=sys.stderr)
        return 2
    kvtier, kvtierd, src = sys.argv[1:4]
    problems = []
    nd = check_kvtierd(kvtierd, src, problems)
    nk, nh = check_kvtier(kvtier, src, problems)
    print(f"kvtierd: {nd} options; kvtier: {nk} long options in the code, {nh} --help texts; "
          f"{len(problems)} problems")
    for p in problems:
        print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""run_sglang.py - the SGLang HiCache backend's test on real sglang, as a meson test.

Usage: run_sglang.py BUILD-PYTHON-DIR KVTIERD.  Opt-in: registered only with
meson's -Dsglang=true (suite "sglang"), because the first run installs
sglang 0.5.23 and torch 2.14.1 (PyPI's CUDA build, which also runs on CPU)
with the packages listed in sglang-requirements.txt, about 5.5 GB, into
<build>/python/venv-sglang (about 11 minutes of pip on the shared 2-core
machine), kept for later runs.  SGLang compiles a small C++ hashing
extension on first use (torch cpp_extension), into
<build>/python/torch-extensions.  Exits 77 only when PyPI cannot be
reached.  Then runs pytest on test_sglang.py with the built package and
this directory on PYTHONPATH.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sglang_support  # noqa: E402


def main():
    build, kvtierd = sys.argv[1], sys.argv[2]
    py = sglang_support.venv(build)
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([build, here]), KVTIERD=kvtierd,
               PYTHONDONTWRITEBYTECODE="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               TORCH_EXTENSIONS_DIR=os.path.join(build, "torch-extensions"))
    r = subprocess.run([py, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                        os.path.join(here, "test_sglang.py"),
                        "--basetemp", os.path.join(build, "pytest-sglang-tmp")], env=env)
    sys.exit(0 if r.returncode == 0 else 1)


if __name__ == "__main__":
    main()

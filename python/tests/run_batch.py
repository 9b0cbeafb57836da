#!/usr/bin/env python3
"""run_batch.py - the binding's batched calls (test_batch.py), as a meson test.

Usage: run_batch.py BUILD-PYTHON-DIR KVTIERD.  Uses run.py's test venv
(pytest and numpy, pinned; made once, 77 only when PyPI cannot be reached)
and runs pytest on test_batch.py with the built package on PYTHONPATH.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402


def main():
    build, kvtierd = sys.argv[1], sys.argv[2]
    py = run.venv_python(build)
    env = dict(os.environ, PYTHONPATH=build, KVTIERD=kvtierd, PYTHONDONTWRITEBYTECODE="1")
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([py, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                        os.path.join(here, "test_batch.py"),
                        "--basetemp", os.path.join(build, "pytest-batch-tmp")], env=env)
    sys.exit(0 if r.returncode == 0 else 1)


if __name__ == "__main__":
    main()
